//! The table printers of kube-apiserver (pkg/printers/internalversion/printers.go, v1.36):
//! column definitions and row cells per kind, on the objects' JSON.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::duration::{between, human_duration, since, timestamp};
use crate::apimachinery::labels::Selector;

/// `metav1.ObjectMeta{}.SwaggerDoc()["name"]`.
pub const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
/// `metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]`.
pub const CREATED_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
pub(super) const CONTAINERS_DOC: &str = "Names of each container in the template.";
pub(super) const IMAGES_DOC: &str = "Images referenced by each container in the template.";
const SELECTOR_DOC: &str = "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

/// A `metav1.TableColumnDefinition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// The column's header (`NAME`, `READY`, ... once kubectl upper-cases it).
    pub name: &'static str,
    /// The OpenAPI type of the cells: `string`, `integer`, ...
    pub kind: &'static str,
    /// The OpenAPI format: `name` for the object's name column, else empty.
    pub format: &'static str,
    /// The column's description: the API documentation of the field it shows.
    pub description: &'static str,
    /// 0: always shown; 1: shown by `kubectl get -o wide`.
    pub priority: i32,
}

impl Column {
    /// A column definition (usable in `const` tables).
    pub const fn new(
        name: &'static str,
        kind: &'static str,
        format: &'static str,
        description: &'static str,
        priority: i32,
    ) -> Column {
        Column { name, kind, format, description, priority }
    }

    /// The `TableColumnDefinition` JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

pub(super) const NAME: Column = Column::new("Name", "string", "name", NAME_DOC, 0);
pub(super) const AGE: Column = Column::new("Age", "string", "", CREATED_DOC, 0);

pub(super) const fn string(name: &'static str, description: &'static str) -> Column {
    Column::new(name, "string", "", description, 0)
}

pub(super) const fn integer(name: &'static str, description: &'static str) -> Column {
    Column::new(name, "integer", "", description, 0)
}

pub(super) const fn wide(name: &'static str, description: &'static str) -> Column {
    Column::new(name, "string", "", description, 1)
}

/// A `metav1.TableRow` before its object is attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// One cell per column, in the columns' order.
    pub cells: Vec<Value>,
    /// `TableRowCondition`s, e.g. `Completed` for a finished pod.
    pub conditions: Vec<Value>,
}

impl Row {
    /// A row of these cells, without conditions.
    pub fn new(cells: Vec<Value>) -> Row {
        Row { cells, conditions: Vec::new() }
    }
}

/// A kind's printer: its columns and how one object becomes a row.
pub struct Printer {
    pub columns: &'static [Column],
    pub row: fn(&Value, Timestamp) -> Row,
}

/// The printer kube-apiserver registers for a kind, if any.
pub fn printer_for(group: &str, kind: &str) -> Option<&'static Printer> {
    let printer = match (group, kind) {
        ("", "Pod") => &POD,
        ("", "Node") => &NODE,
        ("", "Namespace") => &NAMESPACE,
        ("", "Service") => &SERVICE,
        ("", "Endpoints") => &ENDPOINTS,
        ("", "Event") => &EVENT,
        ("", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("", "Secret") => &SECRET,
        ("", "ConfigMap") => &CONFIG_MAP,
        ("", "ResourceQuota") => &RESOURCE_QUOTA,
        ("", "ReplicationController") => &REPLICATION_CONTROLLER,
        ("apps", "Deployment") => &DEPLOYMENT,
        ("apps", "ReplicaSet") => &REPLICA_SET,
        ("apps", "StatefulSet") => &STATEFUL_SET,
        ("apps", "DaemonSet") => &DAEMON_SET,
        ("batch", "Job") => &JOB,
        ("batch", "CronJob") => &CRON_JOB,
        ("coordination.k8s.io", "Lease") => &LEASE,
        ("discovery.k8s.io", "EndpointSlice") => &ENDPOINT_SLICE,
        ("policy", "PodDisruptionBudget") => &POD_DISRUPTION_BUDGET,
        _ => return super::others::printer_for(group, kind),
    };
    Some(printer)
}

// --- JSON access -------------------------------------------------------------------------

pub(super) fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

pub(super) fn int(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or_default()
}

pub(super) fn array<'a>(object: &'a Value, pointer: &str) -> &'a [Value] {
    object.pointer(pointer).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

pub(super) fn len_of(object: &Value, pointer: &str) -> i64 {
    match object.pointer(pointer) {
        Some(Value::Array(items)) => items.len() as i64,
        Some(Value::Object(map)) => map.len() as i64,
        _ => 0,
    }
}

pub(super) fn name(object: &Value) -> Value {
    json!(text(object, "/metadata/name"))
}

pub(super) fn age(object: &Value, now: Timestamp) -> Value {
    json!(since(object.pointer("/metadata/creationTimestamp"), now))
}

pub(super) fn or(value: &str, fallback: &str) -> String {
    if value.is_empty() { fallback.into() } else { value.into() }
}

/// `layoutContainerCells`: container names and images, comma-separated.
pub(super) fn containers(object: &Value, pointer: &str) -> (Value, Value) {
    let containers = array(object, pointer);
    let names: Vec<&str> = containers.iter().map(|c| text(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(c, "/image")).collect();
    (json!(names.join(",")), json!(images.join(",")))
}

/// `labels.FormatLabels`: sorted `k=v` pairs, "<none>" for none.
pub(super) fn format_labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    if pairs.is_empty() { "<none>".into() } else { pairs.join(",") }
}

/// `metav1.LabelSelectorAsSelector(s).String()`: requirements sorted by key; "" for an empty
/// or absent selector, "<invalid>" for one that does not parse.
fn selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return String::new();
    };
    Selector::from_label_selector_object(selector).map_or_else(|_| "<invalid>".into(), |s| s.to_string())
}

/// `metav1.FormatLabelSelector`: like [`selector_string`], "<none>" when empty.
pub(super) fn format_label_selector(selector: Option<&Value>) -> String {
    or(&selector_string(selector), "<none>")
}

/// `intstr.IntOrString.String()`.
fn int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.as_i64().unwrap_or_default().to_string(),
    }
}

fn has_condition(object: &Value, kind: &str) -> bool {
    array(object, "/status/conditions").iter().any(|c| c["type"] == kind && c["status"] == "True")
}

// --- Pods --------------------------------------------------------------------------------

const POD: Printer = Printer {
    columns: &[
        NAME,
        string("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        string("Status", "The aggregate status of the containers in this pod."),
        string(
            "Restarts",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        AGE,
        wide(
            "IP",
            "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        ),
        wide(
            "Node",
            "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
        ),
        wide(
            "Nominated Node",
            "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
        ),
        wide(
            "Readiness Gates",
            "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
        ),
    ],
    row: pod_row,
};

/// `isRestartableInitContainer`: a sidecar (`restartPolicy: Always`).
fn is_sidecar(pod: &Value, name: &str) -> bool {
    array(pod, "/spec/initContainers").iter().any(|c| c["name"] == name && c["restartPolicy"] == "Always")
}

/// The later of a restart time and a container's last termination.
fn later_restart(current: Option<Timestamp>, status: &Value) -> Option<Timestamp> {
    match timestamp(status.pointer("/lastState/terminated/finishedAt")) {
        Some(finished) if current.is_none_or(|c| c < finished) => Some(finished),
        _ => current,
    }
}

/// `printPod`: READY, the STATUS reason from phase, init containers, container states and
/// deletion, RESTARTS with the age of the last restart.
fn pod_row(pod: &Value, now: Timestamp) -> Row {
    let init_specs = array(pod, "/spec/initContainers");
    let total =
        array(pod, "/spec/containers").len() + init_specs.iter().filter(|c| c["restartPolicy"] == "Always").count();
    let mut ready = 0;
    let (mut restarts, mut sidecar_restarts) = (0i64, 0i64);
    let (mut last_restart, mut last_sidecar_restart) = (None, None);
    let phase = text(pod, "/status/phase");
    let mut reason = or(text(pod, "/status/reason"), phase);
    if array(pod, "/status/conditions").iter().any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let mut conditions = Vec::new();
    match phase {
        "Succeeded" => conditions.push(completed_condition("Succeeded", "The pod has completed successfully.")),
        "Failed" => conditions.push(completed_condition("Failed", "The pod failed.")),
        _ => {}
    }
    let mut initializing = false;
    for (i, status) in array(pod, "/status/initContainerStatuses").iter().enumerate() {
        let name = text(status, "/name");
        restarts += int(status, "/restartCount");
        last_restart = later_restart(last_restart, status);
        let sidecar = is_sidecar(pod, name);
        if sidecar {
            sidecar_restarts += int(status, "/restartCount");
            last_sidecar_restart = later_restart(last_sidecar_restart, status);
        }
        let terminated = status.pointer("/state/terminated");
        let waiting_reason = text(status, "/state/waiting/reason");
        if terminated.is_some_and(|t| int(t, "/exitCode") == 0) {
            continue;
        } else if sidecar && status["started"] == true {
            if status["ready"] == true {
                ready += 1;
            }
            continue;
        } else if let Some(terminated) = terminated {
            reason = match (text(terminated, "/reason"), int(terminated, "/signal")) {
                ("", 0) => format!("Init:ExitCode:{}", int(terminated, "/exitCode")),
                ("", signal) => format!("Init:Signal:{signal}"),
                (why, _) => format!("Init:{why}"),
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }
    if !initializing || has_condition(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        // The reason of the last container (in reverse order) that exited with an error.
        let mut error_reason = String::new();
        for status in array(pod, "/status/containerStatuses").iter().rev() {
            restarts += int(status, "/restartCount");
            last_restart = later_restart(last_restart, status);
            let waiting_reason = text(status, "/state/waiting/reason");
            let terminated = status.pointer("/state/terminated");
            if !waiting_reason.is_empty() {
                reason = waiting_reason.into();
            } else if let Some(terminated) = terminated {
                reason = match (text(terminated, "/reason"), int(terminated, "/signal")) {
                    ("", 0) => format!("ExitCode:{}", int(terminated, "/exitCode")),
                    ("", signal) => format!("Signal:{signal}"),
                    (why, _) => why.into(),
                };
                if int(terminated, "/exitCode") != 0 {
                    error_reason = reason.clone();
                }
            } else if status["ready"] == true && status.pointer("/state/running").is_some() {
                has_running = true;
                ready += 1;
            }
        }
        // Since v1.35 a pod whose last container completed shows another container's error
        // rather than "Completed" (or "NotReady").
        if reason == "Completed" {
            if has_running && has_condition(pod, "Ready") {
                reason = "Running".into();
            } else if !error_reason.is_empty() {
                reason = error_reason;
            } else if has_running {
                reason = "NotReady".into();
            }
        }
    }
    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
    if deleting && text(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".into();
    }
    let restarts = match last_restart {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(between(at, now))),
        _ => restarts.to_string(),
    };
    let pod_ip = array(pod, "/status/podIPs").first().map(|ip| text(ip, "/ip")).unwrap_or_default();
    let gates = array(pod, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = array(pod, "/status/conditions");
        let met = gates
            .iter()
            .filter(|gate| {
                conditions.iter().find(|c| c["type"] == gate["conditionType"]).is_some_and(|c| c["status"] == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    Row {
        cells: vec![
            name(pod),
            json!(format!("{ready}/{total}")),
            json!(reason),
            json!(restarts),
            age(pod, now),
            json!(or(pod_ip, "<none>")),
            json!(or(text(pod, "/spec/nodeName"), "<none>")),
            json!(or(text(pod, "/status/nominatedNodeName"), "<none>")),
            json!(readiness_gates),
        ],
        conditions,
    }
}

/// `podSuccessConditions` / `podFailedConditions`: a `Completed` row condition.
fn completed_condition(reason: &str, message: &str) -> Value {
    json!({"type": "Completed", "status": "True", "reason": reason, "message": message})
}

// --- Workloads ---------------------------------------------------------------------------

const REPLICA_SET: Printer = Printer {
    columns: &[
        NAME,
        integer(
            "Desired",
            "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        ),
        integer(
            "Current",
            "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        ),
        integer("Ready", "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition."),
        AGE,
        wide("Containers", CONTAINERS_DOC),
        wide("Images", IMAGES_DOC),
        wide("Selector", SELECTOR_DOC),
    ],
    row: replica_set_row,
};

/// `printReplicaSet`.
fn replica_set_row(rs: &Value, now: Timestamp) -> Row {
    replicas_row(rs, now, selector_string(rs.pointer("/spec/selector")))
}

/// The row of a ReplicaSet or ReplicationController: desired, current and ready replicas, age,
/// then the wide columns (`selector` as each kind prints it).
fn replicas_row(object: &Value, now: Timestamp, selector: String) -> Row {
    let (names, images) = containers(object, "/spec/template/spec/containers");
    Row::new(vec![
        name(object),
        json!(int(object, "/spec/replicas")),
        json!(int(object, "/status/replicas")),
        json!(int(object, "/status/readyReplicas")),
        age(object, now),
        names,
        images,
        json!(selector),
    ])
}

const REPLICATION_CONTROLLER: Printer = Printer {
    columns: &[
        NAME,
        integer(
            "Desired",
            "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        ),
        integer(
            "Current",
            "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        ),
        integer("Ready", "The number of ready replicas for this replication controller."),
        AGE,
        wide("Containers", CONTAINERS_DOC),
        wide("Images", IMAGES_DOC),
        wide(
            "Selector",
            "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        ),
    ],
    row: replication_controller_row,
};

/// `printReplicationController`.
fn replication_controller_row(rc: &Value, now: Timestamp) -> Row {
    replicas_row(rc, now, format_labels(rc.pointer("/spec/selector")))
}

const DEPLOYMENT: Printer = Printer {
    columns: &[
        NAME,
        string("Ready", "Number of the pod with ready state"),
        string(
            "Up-to-date",
            "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
        ),
        string(
            "Available",
            "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        AGE,
        wide("Containers", CONTAINERS_DOC),
        wide("Images", IMAGES_DOC),
        wide(
            "Selector",
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
        ),
    ],
    row: deployment_row,
};

/// `printDeployment`.
fn deployment_row(deployment: &Value, now: Timestamp) -> Row {
    let (names, images) = containers(deployment, "/spec/template/spec/containers");
    Row::new(vec![
        name(deployment),
        json!(format!("{}/{}", int(deployment, "/status/readyReplicas"), int(deployment, "/spec/replicas"))),
        json!(int(deployment, "/status/updatedReplicas")),
        json!(int(deployment, "/status/availableReplicas")),
        age(deployment, now),
        names,
        images,
        json!(selector_string(deployment.pointer("/spec/selector"))),
    ])
}

const STATEFUL_SET: Printer = Printer {
    columns: &[
        NAME,
        string("Ready", "Number of the pod with ready state"),
        AGE,
        wide("Containers", CONTAINERS_DOC),
        wide("Images", IMAGES_DOC),
    ],
    row: stateful_set_row,
};

/// `printStatefulSet`.
fn stateful_set_row(set: &Value, now: Timestamp) -> Row {
    let (names, images) = containers(set, "/spec/template/spec/containers");
    Row::new(vec![
        name(set),
        json!(format!("{}/{}", int(set, "/status/readyReplicas"), int(set, "/spec/replicas"))),
        age(set, now),
        names,
        images,
    ])
}

const DAEMON_SET: Printer = Printer {
    columns: &[
        NAME,
        integer(
            "Desired",
            "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        integer(
            "Current",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        integer(
            "Ready",
            "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        ),
        integer("Up-to-date", "The total number of nodes that are running updated daemon pod"),
        integer(
            "Available",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
        ),
        string(
            "Node Selector",
            "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
        ),
        AGE,
        wide("Containers", CONTAINERS_DOC),
        wide("Images", IMAGES_DOC),
        wide(
            "Selector",
            "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        ),
    ],
    row: daemon_set_row,
};

/// `printDaemonSet`.
fn daemon_set_row(set: &Value, now: Timestamp) -> Row {
    let (names, images) = containers(set, "/spec/template/spec/containers");
    Row::new(vec![
        name(set),
        json!(int(set, "/status/desiredNumberScheduled")),
        json!(int(set, "/status/currentNumberScheduled")),
        json!(int(set, "/status/numberReady")),
        json!(int(set, "/status/updatedNumberScheduled")),
        json!(int(set, "/status/numberAvailable")),
        json!(format_labels(set.pointer("/spec/template/spec/nodeSelector"))),
        age(set, now),
        names,
        images,
        json!(selector_string(set.pointer("/spec/selector"))),
    ])
}

const JOB: Printer = Printer {
    columns: &[
        NAME,
        string("Status", "Status of the job."),
        string(
            "Completions",
            "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
        ),
        string("Duration", "Time required to complete the job."),
        AGE,
        wide("Containers", CONTAINERS_DOC),
        wide("Images", IMAGES_DOC),
        wide(
            "Selector",
            "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        ),
    ],
    row: job_row,
};

/// `printJob`: STATUS from the conditions, COMPLETIONS, DURATION from start to completion
/// (or now).
fn job_row(job: &Value, now: Timestamp) -> Row {
    let succeeded = int(job, "/status/succeeded");
    let completions = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int(job, "/spec/parallelism") {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = timestamp(job.pointer("/status/startTime"));
    let duration = match (start, timestamp(job.pointer("/status/completionTime"))) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(between(start, now)),
        (Some(start), Some(end)) => human_duration(between(start, end)),
    };
    let deleting = job.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
    let status = if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if deleting {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (names, images) = containers(job, "/spec/template/spec/containers");
    Row::new(vec![
        name(job),
        json!(status),
        json!(completions),
        json!(duration),
        age(job, now),
        names,
        images,
        json!(selector_string(job.pointer("/spec/selector"))),
    ])
}

const CRON_JOB: Printer = Printer {
    columns: &[
        NAME,
        string("Schedule", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
        string(
            "Timezone",
            "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
        ),
        Column::new(
            "Suspend",
            "boolean",
            "",
            "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
            0,
        ),
        integer("Active", "A list of pointers to currently running jobs."),
        string("Last Schedule", "Information when was the last time the job was successfully scheduled."),
        AGE,
        wide("Containers", CONTAINERS_DOC),
        wide("Images", IMAGES_DOC),
        wide(
            "Selector",
            "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        ),
    ],
    row: cron_job_row,
};

/// `printCronJob`.
fn cron_job_row(cron_job: &Value, now: Timestamp) -> Row {
    let last_schedule = match cron_job.pointer("/status/lastScheduleTime").filter(|t| !t.is_null()) {
        Some(at) => since(Some(at), now),
        None => "<none>".into(),
    };
    let suspend = match cron_job.pointer("/spec/suspend").and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let (names, images) = containers(cron_job, "/spec/jobTemplate/spec/template/spec/containers");
    Row::new(vec![
        name(cron_job),
        json!(text(cron_job, "/spec/schedule")),
        json!(or(text(cron_job, "/spec/timeZone"), "<none>")),
        json!(suspend),
        json!(len_of(cron_job, "/status/active")),
        json!(last_schedule),
        age(cron_job, now),
        names,
        images,
        json!(format_label_selector(cron_job.pointer("/spec/jobTemplate/spec/selector"))),
    ])
}

const POD_DISRUPTION_BUDGET: Printer = Printer {
    columns: &[
        NAME,
        string("Min Available", "The minimum number of pods that must be available."),
        string("Max Unavailable", "The maximum number of pods that may be unavailable."),
        integer("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time."),
        AGE,
    ],
    row: pod_disruption_budget_row,
};

/// `printPodDisruptionBudget`.
fn pod_disruption_budget_row(pdb: &Value, now: Timestamp) -> Row {
    let bound = |pointer: &str| pdb.pointer(pointer).filter(|v| !v.is_null()).map_or("N/A".into(), int_or_string);
    Row::new(vec![
        name(pdb),
        json!(bound("/spec/minAvailable")),
        json!(bound("/spec/maxUnavailable")),
        json!(int(pdb, "/status/disruptionsAllowed")),
        age(pdb, now),
    ])
}

// --- Cluster and networking ----------------------------------------------------------------

const NODE: Printer = Printer {
    columns: &[
        NAME,
        string("Status", "The status of the node"),
        string("Roles", "The roles of the node"),
        AGE,
        string("Version", "Kubelet Version reported by the node."),
        wide(
            "Internal-IP",
            "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).",
        ),
        wide(
            "External-IP",
            "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).",
        ),
        wide("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
        wide("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
        wide(
            "Container-Runtime",
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        ),
    ],
    row: node_row,
};

/// `printNode`: STATUS from the Ready condition plus SchedulingDisabled, ROLES from the
/// `node-role.kubernetes.io/*` and `kubernetes.io/role` labels.
fn node_row(node: &Value, now: Timestamp) -> Row {
    let mut status: Vec<String> = Vec::new();
    // The last Ready condition wins, as in printNode's condition map.
    if let Some(ready) = array(node, "/status/conditions").iter().rev().find(|c| c["type"] == "Ready") {
        status.push(if ready["status"] == "True" { "Ready".into() } else { "NotReady".into() });
    }
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if node.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles = BTreeSet::new();
    for (key, value) in node.pointer("/metadata/labels").and_then(Value::as_object).into_iter().flatten() {
        if let Some(role) = key.strip_prefix("node-role.kubernetes.io/").filter(|r| !r.is_empty()) {
            roles.insert(role.to_string());
        } else if key == "kubernetes.io/role" && value.as_str().is_some_and(|v| !v.is_empty()) {
            roles.insert(value.as_str().unwrap_or_default().to_string());
        }
    }
    let roles = roles.into_iter().collect::<Vec<_>>().join(",");
    let address = |kind: &str| {
        let addresses = array(node, "/status/addresses");
        addresses.iter().find(|a| a["type"] == kind).map_or("<none>".into(), |a| text(a, "/address").to_string())
    };
    let info = |field: &str| or(text(node, &format!("/status/nodeInfo/{field}")), "<unknown>");
    // Since v1.35 the kernel version is followed by the architecture.
    let architecture = text(node, "/status/nodeInfo/architecture");
    let kernel = if architecture.is_empty() {
        info("kernelVersion")
    } else {
        format!("{} ({architecture})", info("kernelVersion"))
    };
    Row::new(vec![
        name(node),
        json!(status.join(",")),
        json!(or(&roles, "<none>")),
        age(node, now),
        json!(text(node, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(kernel),
        json!(info("containerRuntimeVersion")),
    ])
}

const NAMESPACE: Printer =
    Printer { columns: &[NAME, string("Status", "The status of the namespace"), AGE], row: namespace_row };

/// `printNamespace`.
fn namespace_row(namespace: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(namespace), json!(text(namespace, "/status/phase")), age(namespace, now)])
}

const SERVICE: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Type",
            "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
        ),
        string(
            "Cluster-IP",
            "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
        ),
        string(
            "External-IP",
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.",
        ),
        string(
            "Port(s)",
            "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
        ),
        AGE,
        wide(
            "Selector",
            "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
        ),
    ],
    row: service_row,
};

/// `printService`.
fn service_row(service: &Value, now: Timestamp) -> Row {
    let cluster_ip = array(service, "/spec/clusterIPs").first().and_then(Value::as_str).unwrap_or("<none>");
    let ports: Vec<String> = array(service, "/spec/ports")
        .iter()
        .map(|port| {
            let (number, protocol) = (int(port, "/port"), text(port, "/protocol"));
            match int(port, "/nodePort") {
                node_port if node_port > 0 => format!("{number}:{node_port}/{protocol}"),
                _ => format!("{number}/{protocol}"),
            }
        })
        .collect();
    Row::new(vec![
        name(service),
        json!(text(service, "/spec/type")),
        json!(cluster_ip),
        json!(service_external_ip(service)),
        json!(or(&ports.join(","), "<none>")),
        age(service, now),
        json!(format_labels(service.pointer("/spec/selector"))),
    ])
}

/// `getServiceExternalIP` (wide: load balancer addresses are not shortened).
fn service_external_ip(service: &Value) -> String {
    let external: Vec<&str> = array(service, "/spec/externalIPs").iter().filter_map(Value::as_str).collect();
    match text(service, "/spec/type") {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".into(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let ingress: BTreeSet<&str> = array(service, "/status/loadBalancer/ingress")
                .iter()
                .filter_map(|i| [text(i, "/ip"), text(i, "/hostname")].into_iter().find(|s| !s.is_empty()))
                .collect();
            let mut all: Vec<&str> = ingress.into_iter().collect();
            all.extend(external);
            if all.is_empty() { "<pending>".into() } else { all.join(",") }
        }
        "ExternalName" => text(service, "/spec/externalName").into(),
        _ => "<unknown>".into(),
    }
}

const ENDPOINTS: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Endpoints",
            "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
        ),
        AGE,
    ],
    row: endpoints_row,
};

/// `printEndpoints` with `formatEndpoints`: up to three `ip:port`, then "+ N more...".
fn endpoints_row(endpoints: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(endpoints), json!(format_endpoints(endpoints)), age(endpoints, now)])
}

fn format_endpoints(endpoints: &Value) -> String {
    const MAX: usize = 3;
    let subsets = array(endpoints, "/subsets");
    if subsets.is_empty() {
        return "<none>".into();
    }
    let (mut list, mut more, mut count) = (Vec::new(), false, 0);
    for subset in subsets {
        let addresses = array(subset, "/addresses");
        let ports = array(subset, "/ports");
        let port_numbers: Vec<Option<i64>> =
            if ports.is_empty() { vec![None] } else { ports.iter().map(|p| Some(int(p, "/port"))).collect() };
        for port in port_numbers {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = text(address, "/ip");
                list.push(match port {
                    None => ip.to_string(),
                    Some(port) if ip.contains(':') => format!("[{ip}]:{port}"),
                    Some(port) => format!("{ip}:{port}"),
                });
            }
        }
    }
    let joined = list.join(",");
    if more { format!("{joined} + {} more...", count - MAX) } else { joined }
}

const ENDPOINT_SLICE: Printer = Printer {
    columns: &[
        NAME,
        string(
            "AddressType",
            "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type.",
        ),
        string(
            "Ports",
            "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.",
        ),
        string(
            "Endpoints",
            "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
        ),
        AGE,
    ],
    row: endpoint_slice_row,
};

/// `printEndpointSlice` with `formatDiscoveryPorts` / `formatDiscoveryEndpoints`.
fn endpoint_slice_row(slice: &Value, now: Timestamp) -> Row {
    let ports = array(slice, "/ports").iter().map(|port| match port.get("port").and_then(Value::as_i64) {
        Some(number) => number.to_string(),
        None => port.get("name").and_then(Value::as_str).unwrap_or("*").to_string(),
    });
    let addresses = array(slice, "/endpoints")
        .iter()
        .flat_map(|e| array(e, "/addresses").iter().filter_map(Value::as_str).map(str::to_string));
    Row::new(vec![
        name(slice),
        json!(text(slice, "/addressType")),
        json!(list_with_more(ports)),
        json!(list_with_more(addresses)),
        age(slice, now),
    ])
}

/// `listWithMoreString`: up to three items, then "+ N more..."; "<unset>" for none.
fn list_with_more(items: impl Iterator<Item = String>) -> String {
    const MAX: usize = 3;
    let items: Vec<String> = items.collect();
    let joined = items.iter().take(MAX).cloned().collect::<Vec<_>>().join(",");
    if items.len() > MAX {
        format!("{joined} + {} more...", items.len() - MAX)
    } else if joined.is_empty() {
        "<unset>".into()
    } else {
        joined
    }
}

pub(super) const EVENT: Printer = Printer {
    columns: &[
        string("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
        string("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
        string(
            "Reason",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        string("Object", "The object that this event is about."),
        wide(
            "Subobject",
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
        ),
        wide("Source", "The component reporting this event. Should be a short machine understandable string."),
        string("Message", "A human-readable description of the status of this operation."),
        wide("First Seen", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
        wide("Count", "The number of times this event has occurred."),
        Column::new("Name", "string", "name", NAME_DOC, 1),
    ],
    row: event_row,
};

/// `printEvent`: LAST SEEN from lastTimestamp, the series or the first sighting; OBJECT as
/// `kind/name` in lower case; the count is 1 for a singleton event of the new API.
pub(super) fn event_row(event: &Value, now: Timestamp) -> Row {
    let present = |pointer: &str| event.pointer(pointer).filter(|v| !v.is_null());
    let first_seen = match present("/firstTimestamp") {
        Some(at) => since(Some(at), now),
        None => since(present("/eventTime"), now),
    };
    let mut last_seen = match present("/lastTimestamp") {
        Some(at) => since(Some(at), now),
        None => first_seen.clone(),
    };
    let mut count = int(event, "/count");
    if let Some(series) = present("/series") {
        last_seen = since(series.get("lastObservedTime"), now);
        count = int(series, "/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = text(event, "/involvedObject/kind").to_lowercase();
    let target = match text(event, "/involvedObject/name") {
        "" => kind,
        object => format!("{kind}/{object}"),
    };
    let component = or(text(event, "/source/component"), text(event, "/reportingComponent"));
    let instance = or(text(event, "/source/host"), text(event, "/reportingInstance"));
    let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
    Row::new(vec![
        json!(last_seen),
        json!(text(event, "/type")),
        json!(text(event, "/reason")),
        json!(target),
        json!(text(event, "/involvedObject/fieldPath")),
        json!(source),
        json!(text(event, "/message").trim()),
        json!(first_seen),
        json!(count),
        name(event),
    ])
}

// --- Configuration -----------------------------------------------------------------------

/// Name and age only: the secrets count column went in v1.36.
const SERVICE_ACCOUNT: Printer = Printer { columns: &[NAME, AGE], row: service_account_row };

/// `printServiceAccount`.
fn service_account_row(account: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(account), age(account, now)])
}

const SECRET: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Type",
            "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
        ),
        string(
            "Data",
            "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
        ),
        AGE,
    ],
    row: secret_row,
};

/// `printSecret`.
fn secret_row(secret: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(secret), json!(text(secret, "/type")), json!(len_of(secret, "/data")), age(secret, now)])
}

const CONFIG_MAP: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Data",
            "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
        ),
        AGE,
    ],
    row: config_map_row,
};

/// `printConfigMap`: data and binary data keys together.
fn config_map_row(config_map: &Value, now: Timestamp) -> Row {
    let keys = len_of(config_map, "/data") + len_of(config_map, "/binaryData");
    Row::new(vec![name(config_map), json!(keys), age(config_map, now)])
}

const LEASE: Printer = Printer {
    columns: &[
        NAME,
        string(
            "Holder",
            "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
        ),
        AGE,
    ],
    row: lease_row,
};

/// `printLease`.
fn lease_row(lease: &Value, now: Timestamp) -> Row {
    Row::new(vec![name(lease), json!(text(lease, "/spec/holderIdentity")), age(lease, now)])
}

const RESOURCE_QUOTA: Printer = Printer {
    columns: &[
        NAME,
        string("Request", "Request represents a minimum amount of cpu/memory that a container may consume."),
        string(
            "Limit",
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
        AGE,
    ],
    row: resource_quota_row,
};

/// `printResourceQuota`: `resource: used/hard` for each hard limit in name order, the
/// `limits.*` ones in the LIMIT column.
fn resource_quota_row(quota: &Value, now: Timestamp) -> Row {
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    let mut hard: Vec<(&String, &Value)> =
        quota.pointer("/status/hard").and_then(Value::as_object).into_iter().flatten().collect();
    hard.sort_by(|a, b| a.0.cmp(b.0));
    for (resource, hard) in hard {
        let used = quota.pointer("/status/used").and_then(|u| u.get(resource));
        let piece = format!("{resource}: {}/{}", canonical(used), canonical(Some(hard)));
        let is_limit = resource.split('.').count() > 1 && resource.split('.').next() == Some("limits");
        if is_limit { limits.push(piece) } else { requests.push(piece) }
    }
    Row::new(vec![name(quota), json!(requests.join(", ")), json!(limits.join(", ")), age(quota, now)])
}

/// `Quantity.String()`: the canonical form; an absent quantity is "0".
pub(super) fn canonical(quantity: Option<&Value>) -> String {
    quantity.and_then(crate::quantity::Quantity::from_json).map_or("0".into(), |q| q.canonical())
}
