//! kube-apiserver's audit log, parsed, and the invariants checked on it: pure functions over
//! the audit events and the server's final state, so that they are tested on hand-made lines
//! and run after any fault.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

/// `system:kube-controller-manager`, the identity of the controller manager's own client (the
/// Lease, and every controller without `--use-service-account-credentials`).
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";
/// The group of kube-system's ServiceAccounts, which the controllers act as with
/// `--use-service-account-credentials`.
const KUBE_SYSTEM_ACCOUNTS: &str = "system:serviceaccounts:kube-system";
/// client-go's event spam filter (`tools/record/events_cache.go`): 25 events per source,
/// involved object and type pass at once, then one per 5 minutes.
pub const SPAM_BURST: u64 = 25;
const WRITES: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// One completed request, as the audit log shows it.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub struct AuditEvent {
    pub verb: String,
    pub user: String,
    pub groups: Vec<String>,
    pub user_agent: String,
    /// The first of `sourceIPs`: the connection's peer unless a proxy header says otherwise.
    pub source_ip: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: u16,
    /// `responseStatus.reason` of a failed request (`Timeout`, `Conflict`, …).
    pub reason: String,
    pub received: Timestamp,
    pub completed: Timestamp,
    /// The response object, logged at RequestResponse level only.
    pub response: Option<Value>,
    /// The request's object, logged at Request level and above.
    pub request: Option<Value>,
}

impl AuditEvent {
    fn parse(line: &str) -> Option<AuditEvent> {
        let e: Value = serde_json::from_str(line).ok()?;
        if e["stage"] != "ResponseComplete" {
            return None;
        }
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let time = |v: &Value| v.as_str()?.parse::<Timestamp>().ok();
        let object = &e["objectRef"];
        Some(AuditEvent {
            verb: text(&e["verb"]),
            user: text(&e["user"]["username"]),
            groups: e["user"]["groups"].as_array().map(|g| g.iter().map(text).collect()).unwrap_or_default(),
            user_agent: text(&e["userAgent"]),
            source_ip: text(&e["sourceIPs"][0]),
            resource: text(&object["resource"]),
            subresource: text(&object["subresource"]),
            namespace: text(&object["namespace"]),
            name: text(&object["name"]),
            code: e["responseStatus"]["code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
            reason: text(&e["responseStatus"]["reason"]),
            received: time(&e["requestReceivedTimestamp"])?,
            completed: time(&e["stageTimestamp"]).or_else(|| time(&e["requestReceivedTimestamp"]))?,
            response: e.get("responseObject").cloned(),
            request: e.get("requestObject").cloned(),
        })
    }

    /// Whether the request succeeded (2xx).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// Whether the request may have taken effect though it failed: kube-apiserver answers 504
    /// `Timeout` when its client goes away (a SIGKILLed controller manager) while the write to
    /// etcd goes on and may commit (`finisher.FinishRequest` returns on the request's context).
    pub fn outcome_unknown(&self) -> bool {
        self.code == 504 && self.reason == "Timeout"
    }

    /// Whether the controller manager sent it (its own identity or a kube-system ServiceAccount).
    pub fn by_controller_manager(&self) -> bool {
        self.user == CONTROLLER_MANAGER_USER || self.groups.iter().any(|g| g == KUBE_SYSTEM_ACCOUNTS)
    }

    /// Whether it is a successful write (create, update, patch, delete).
    pub fn is_write(&self) -> bool {
        WRITES.contains(&self.verb.as_str()) && self.succeeded()
    }

    /// Whether the controller `name` sent it (its ServiceAccount, or its user agent's suffix
    /// without service-account credentials).
    fn by_controller(&self, name: &str) -> bool {
        self.user == format!("system:serviceaccount:kube-system:{name}") || self.user_agent.ends_with(name)
    }
}

/// The events of an audit log's text, ordered by completion (the log is written as requests
/// complete, but concurrent requests interleave).
pub fn parse(text: &str) -> Vec<AuditEvent> {
    let mut events: Vec<AuditEvent> = text.lines().filter_map(AuditEvent::parse).collect();
    events.sort_by_key(|e| e.completed);
    events
}

fn controller_owner<'v>(object: &'v Value, kind: &str) -> Option<&'v str> {
    let owners = object["metadata"]["ownerReferences"].as_array()?;
    owners.iter().find(|o| o["kind"] == kind && o["controller"] == true)?["name"].as_str()
}

fn key(object: &Value) -> (String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (text(&object["metadata"]["namespace"]), text(&object["metadata"]["name"]))
}

/// Pods created (successful creates, with the created pod), by namespace and name.
fn created_pods(events: &[AuditEvent]) -> HashMap<(String, String), (&AuditEvent, &Value)> {
    let creates = events.iter().filter(|e| e.resource == "pods" && e.subresource.is_empty() && e.verb == "create");
    creates.filter(|e| e.succeeded()).filter_map(|e| e.response.as_ref().map(|pod| (key(pod), (e, pod)))).collect()
}

/// The names of the pods created for `kind` `namespace/name` (their controller owner), in the
/// order kube-apiserver completed the creates. A controller that must create a known number of
/// pods (a Job whose pods all succeed: its completions; a StatefulSet: each ordinal once while
/// none is deleted) acted twice on its object when there are more.
pub fn pods_created_for(events: &[AuditEvent], kind: &str, namespace: &str, name: &str) -> Vec<String> {
    let creates = events.iter().filter(|e| e.resource == "pods" && e.subresource.is_empty() && e.verb == "create");
    creates
        .filter(|e| e.succeeded() && e.namespace == namespace)
        .filter_map(|e| e.response.as_ref())
        .filter(|pod| controller_owner(pod, kind) == Some(name))
        .filter_map(|pod| pod["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// When each pod's first delete was asked for (a delete of it, or a deletecollection of its
/// namespace), from the audit log.
fn delete_requests(
    events: &[AuditEvent],
    pods: &HashMap<(String, String), (&AuditEvent, &Value)>,
) -> HashMap<(String, String), Timestamp> {
    let mut deleted: HashMap<(String, String), Timestamp> = HashMap::new();
    let deletes = events.iter().filter(|e| e.resource == "pods" && e.subresource.is_empty() && e.succeeded());
    for e in deletes {
        let targets: Vec<(String, String)> = match e.verb.as_str() {
            "delete" => vec![(e.namespace.clone(), e.name.clone())],
            "deletecollection" => pods.keys().filter(|(ns, _)| *ns == e.namespace).cloned().collect(),
            _ => continue,
        };
        for target in targets {
            let at = deleted.entry(target).or_insert(e.received);
            *at = (*at).min(e.received);
        }
    }
    deleted
}

/// A Deployment's maxSurge as a pod count (`intstr` or percent of replicas, rounded up; 25%
/// by default), and its replicas.
fn surge_bound(deployment: &Value) -> (i64, i64) {
    let replicas = deployment["spec"]["replicas"].as_i64().unwrap_or(1);
    let surge = &deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"];
    let surge = match (surge.as_i64(), surge.as_str()) {
        (Some(n), _) => n,
        (None, Some(percent)) => {
            let p: i64 = percent.trim_end_matches('%').parse().unwrap_or(25);
            (replicas * p + 99) / 100
        }
        (None, None) => (replicas * 25 + 99) / 100,
    };
    (replicas, surge)
}

/// Each ReplicaSet's `spec.replicas` over time, from its creates and updates (logged with the
/// response at RequestResponse level), by namespace and name. A create or update whose
/// outcome is unknown ([`AuditEvent::outcome_unknown`]) counts as applied when it failed: its
/// request's spec, which a later sync may have read from the server.
fn replica_set_specs(events: &[AuditEvent]) -> HashMap<(String, String), Vec<(Timestamp, i64)>> {
    let mut specs: HashMap<(String, String), Vec<(Timestamp, i64)>> = HashMap::new();
    let writes = events.iter().filter(|e| e.resource == "replicasets" && e.subresource.is_empty());
    for write in writes.filter(|e| matches!(e.verb.as_str(), "create" | "update" | "patch")) {
        let object = if write.succeeded() {
            write.response.as_ref()
        } else if write.outcome_unknown() && write.verb != "patch" {
            write.request.as_ref()
        } else {
            None
        };
        let Some(rs) = object else { continue };
        let Some(replicas) = rs["spec"]["replicas"].as_i64() else { continue };
        let (namespace, name) = key(rs);
        // A create's request may carry no namespace, or only a generateName.
        let namespace = if namespace.is_empty() { write.namespace.clone() } else { namespace };
        let name = if name.is_empty() { write.name.clone() } else { name };
        specs.entry((namespace, name)).or_default().push((write.completed, replicas));
    }
    specs
}

/// Invariant 1, on pods and on ReplicaSets: what upstream guarantees of a Deployment's pods.
///
/// - (a) After every ReplicaSet write, the `spec.replicas` of a Deployment's ReplicaSets add
///   up to at most its replicas + maxSurge (the Deployment controller's own rule,
///   `NewRSNewReplicas`).
/// - (b) A ReplicaSet never creates a pod beyond its `spec.replicas` (the spec in force when
///   the create was received, the one just before, which a sync may have read, or the next
///   one: a write completing as kube-apiserver is SIGKILLed leaves no audit line). A write
///   of a SIGKILLed controller manager is logged as a 504 Timeout yet may commit: its spec
///   counts from its audit line on.
///
/// Together they bound the pods by replicas + maxSurge, except while an old ReplicaSet's
/// scale-down (its spec already lowered) waits for the ReplicaSet controller to delete the pod:
/// upstream's controllers allow that too (the Deployment controller counts specs, not pods),
/// and a handover widens it (a SIGTERMed leader's queued deletes are the next leader's).
/// [`surge_peaks`] reports how far the pods themselves went.
///
/// A pod counts from its create's completion until its first delete request was received (the
/// shortest span it surely existed, so no false alarms); ReplicaSets map to Deployments through
/// their controller owner references in `replica_sets`; the replicas in force are the
/// Deployment's (`deployments`, which the workloads do not scale).
pub fn surge_violations(events: &[AuditEvent], deployments: &[Value], replica_sets: &[Value]) -> Vec<String> {
    let owner_of = deployment_of(replica_sets);
    let specs = replica_set_specs(events);
    let mut violations = Vec::new();
    for deployment in deployments {
        let (replicas, surge) = surge_bound(deployment);
        let (namespace, name) = key(deployment);
        // (a): the latest spec of each of its ReplicaSets, after every write of one.
        let mut writes: Vec<(Timestamp, &str, i64)> = specs
            .iter()
            .filter(|((ns, rs), _)| *ns == namespace && owner_of.get(&(ns.clone(), rs.clone())) == Some(&name))
            .flat_map(|((_, rs), list)| list.iter().map(move |(at, n)| (*at, rs.as_str(), *n)))
            .collect();
        writes.sort();
        let mut current: HashMap<&str, i64> = HashMap::new();
        for (at, rs, n) in writes {
            current.insert(rs, n);
            let total: i64 = current.values().sum();
            if total > replicas + surge {
                violations.push(format!(
                    "Deployment {namespace}/{name}: its ReplicaSets' replicas add up to {total} at {at}, more than {replicas} + {surge} maxSurge"
                ));
                break;
            }
        }
    }
    // (b): live pods of a ReplicaSet at each of its creates.
    for ((namespace, rs), lifetimes) in pod_lifetimes(events) {
        let Some(spec) = specs.get(&(namespace.clone(), rs.clone())) else { continue };
        for (created, received, _) in &lifetimes {
            let live = lifetimes.iter().filter(|(c, _, end)| c <= created && end.is_none_or(|e| e > *created)).count();
            let before: Vec<i64> = spec.iter().filter(|(at, _)| at <= received).map(|(_, n)| *n).collect();
            let next = spec.iter().find(|(at, _)| at > received).map(|(_, n)| *n);
            let allowed = before.iter().rev().take(2).copied().chain(next).max().unwrap_or(0);
            if i64::try_from(live).unwrap_or(i64::MAX) > allowed {
                violations.push(format!(
                    "ReplicaSet {namespace}/{rs}: {live} live pods after a create at {created}, more than its {allowed} replicas"
                ));
                break;
            }
        }
    }
    violations
}

/// Per Deployment, the most live pods seen at once and its replicas + maxSurge (a figure: see
/// [`surge_violations`] for why the pods may pass it).
pub fn surge_peaks(events: &[AuditEvent], deployments: &[Value], replica_sets: &[Value]) -> Vec<(String, i64, i64)> {
    let owner_of = deployment_of(replica_sets);
    let mut changes: BTreeMap<(String, String), Vec<(Timestamp, i64)>> = BTreeMap::new();
    for ((namespace, rs), lifetimes) in pod_lifetimes(events) {
        let Some(deployment) = owner_of.get(&(namespace.clone(), rs)) else { continue };
        let list = changes.entry((namespace, deployment.clone())).or_default();
        for (created, _, end) in lifetimes {
            list.push((created, 1));
            list.extend(end.map(|e| (e, -1)));
        }
    }
    let mut peaks = Vec::new();
    for deployment in deployments {
        let (replicas, surge) = surge_bound(deployment);
        let Some(list) = changes.get_mut(&key(deployment)) else { continue };
        // Deletes before creates at the same instant: never count a pod that was already gone.
        list.sort();
        let (mut live, mut peak) = (0, 0);
        for (_, change) in list.iter() {
            live += change;
            peak = peak.max(live);
        }
        let (namespace, name) = key(deployment);
        peaks.push((format!("{namespace}/{name}"), peak, replicas + surge));
    }
    peaks
}

/// ReplicaSet → Deployment, through controller owner references.
fn deployment_of(replica_sets: &[Value]) -> HashMap<(String, String), String> {
    replica_sets.iter().filter_map(|rs| controller_owner(rs, "Deployment").map(|d| (key(rs), d.to_string()))).collect()
}

/// Each ReplicaSet's pods: (create completed, create received, first delete request).
type Lifetime = (Timestamp, Timestamp, Option<Timestamp>);

fn pod_lifetimes(events: &[AuditEvent]) -> BTreeMap<(String, String), Vec<Lifetime>> {
    let pods = created_pods(events);
    let deleted = delete_requests(events, &pods);
    let mut lifetimes: BTreeMap<(String, String), Vec<Lifetime>> = BTreeMap::new();
    for (pod_key, (create, pod)) in &pods {
        let Some(rs) = controller_owner(pod, "ReplicaSet") else { continue };
        let entry = lifetimes.entry((pod_key.0.clone(), rs.to_string())).or_default();
        entry.push((create.completed, create.received, deleted.get(pod_key).copied()));
    }
    lifetimes
}

/// Invariant 2: one EndpointSlice set per Service and address type, each address in it at
/// most once; and each address at most once in a Service's Endpoints (all the workloads' pods
/// serve the same ports, so the controller packs each address into one subset).
pub fn endpoint_duplicates(slices: &[Value], endpoints: &[Value]) -> Vec<String> {
    let mut violations = Vec::new();
    // (namespace, Service, address type) -> (managed-by labels, addresses).
    type Sets = BTreeMap<(String, String, String), (Vec<String>, Vec<String>)>;
    let mut sets: Sets = BTreeMap::new();
    for slice in slices {
        let labels = &slice["metadata"]["labels"];
        let Some(service) = labels["kubernetes.io/service-name"].as_str() else { continue };
        let (namespace, _) = key(slice);
        let address_type = slice["addressType"].as_str().unwrap_or_default().to_string();
        let set = sets.entry((namespace, service.to_string(), address_type)).or_default();
        set.0.push(labels["endpointslice.kubernetes.io/managed-by"].as_str().unwrap_or_default().to_string());
        for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
            set.1.extend(
                endpoint["addresses"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)),
            );
        }
    }
    for ((namespace, service, address_type), (managers, addresses)) in &sets {
        let mut managers = managers.clone();
        managers.sort();
        managers.dedup();
        if managers.len() > 1 {
            violations.push(format!("Service {namespace}/{service} ({address_type}): slices managed by {managers:?}"));
        }
        for address in duplicates(addresses) {
            violations.push(format!(
                "Service {namespace}/{service} ({address_type}): {address} in more than one slice endpoint"
            ));
        }
    }
    for object in endpoints {
        let (namespace, name) = key(object);
        let subsets = object["subsets"].as_array().into_iter().flatten();
        let addresses: Vec<String> = subsets
            .flat_map(|s| {
                ["addresses", "notReadyAddresses"].map(|field| s[field].as_array().cloned().unwrap_or_default())
            })
            .flatten()
            .filter_map(|a| a["ip"].as_str().map(String::from))
            .collect();
        for address in duplicates(&addresses) {
            violations.push(format!("Endpoints {namespace}/{name}: {address} more than once"));
        }
    }
    violations
}

fn duplicates(values: &[String]) -> Vec<String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for value in values {
        *seen.entry(value).or_default() += 1;
    }
    let mut twice: Vec<String> = seen.into_iter().filter(|(_, n)| *n > 1).map(|(v, _)| v.to_string()).collect();
    twice.sort();
    twice
}

/// One holder's stretch of the Lease: from its first successful Lease write after another
/// address's, to its last before the next holder's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The holder's address.
    pub source_ip: String,
    /// When kube-apiserver received the write that acquired the Lease.
    pub start: Timestamp,
    /// When its last successful write of the Lease completed.
    pub last_renewal: Timestamp,
}

/// The Lease's terms, from the successful writes of `kube-system/<lease>` (an acquisition,
/// renewals and a release all come from the holder's address; a standby's failed attempts are
/// 409s and do not count).
pub fn lease_terms(events: &[AuditEvent], lease: &str) -> Vec<Term> {
    let mut terms: Vec<Term> = Vec::new();
    let writes = events
        .iter()
        .filter(|e| e.resource == "leases" && e.namespace == "kube-system" && e.name == lease && e.is_write());
    for write in writes {
        match terms.last_mut() {
            Some(term) if term.source_ip == write.source_ip => term.last_renewal = write.completed,
            _ => terms.push(Term {
                source_ip: write.source_ip.clone(),
                start: write.received,
                last_renewal: write.completed,
            }),
        }
    }
    terms
}

/// Invariant 3: one writer at a time. Every successful write by the controller manager's
/// identities comes from the address holding the Lease when kube-apiserver received it, except
/// the outgoing holder's in-flight requests: a leader stops writing at the latest
/// `leading_after_renewal` after its last successful renewal (client-go's renewal round starts
/// a retry period after the last success and gives up leading a renew deadline later), so its
/// writes received before `last renewal + leading_after_renewal` pass. Returns the
/// violations, and how many writes passed only by that allowance.
pub fn writer_violations(events: &[AuditEvent], lease: &str, leading_after_renewal: Duration) -> (Vec<String>, usize) {
    let terms = lease_terms(events, lease);
    let deadline = SignedDuration::try_from(leading_after_renewal).unwrap_or(SignedDuration::MAX);
    let (mut violations, mut in_flight) = (Vec::new(), 0);
    for write in events.iter().filter(|e| e.by_controller_manager() && e.is_write()) {
        let current = terms.iter().rev().find(|t| t.start <= write.received);
        if current.is_some_and(|t| t.source_ip == write.source_ip) {
            continue;
        }
        let earlier = terms.iter().rev().filter(|t| t.start <= write.received).find(|t| t.source_ip == write.source_ip);
        if earlier.is_some_and(|t| write.received <= t.last_renewal + deadline) {
            in_flight += 1;
            continue;
        }
        violations.push(format!(
            "{} {} {}/{}/{} from {} at {} while the Lease was held from {}",
            write.user,
            write.verb,
            write.resource,
            write.namespace,
            write.name,
            write.source_ip,
            write.received,
            current.map_or("nobody", |t| t.source_ip.as_str())
        ));
    }
    (violations, in_flight)
}

/// How long before a disruption a pod write's Event may be lost with it: the leader's renew
/// deadline (10 s), in which a process cut off from the server still holds its Events.
pub const LOSS_WINDOW: Duration = Duration::from_secs(10);

/// Invariant 4: no ReplicaSet Event lost beyond upstream's aggregation. The ReplicaSet
/// controller records one `SuccessfulCreate` per pod create it got a 2xx for and one
/// `SuccessfulDelete` per delete; client-go's EventCorrelator aggregates similar events into
/// one with a count (counts add up) and its spam filter passes only [`SPAM_BURST`] events per
/// source, object and type at once. So, per ReplicaSet: each reason's count is at most what
/// the audit log shows, and the counts together are at least the audit log's total, or
/// [`SPAM_BURST`] when that is less (a restarted process starts a fresh filter, which only
/// lets more through). One more loss is upstream's: an Event the server rejects (a 4xx but
/// 409, e.g. the 403s of a freshly restarted kube-apiserver whose RBAC cache is still empty)
/// is not retried (`recordToSink`: "Server rejected event (will not retry!)"); the audit log
/// does not say which object a rejected create was about, so each namespace's shortfall may
/// be up to the ReplicaSet controller's rejected Event writes there. With `audit_gaps` (a
/// kube-apiserver was killed: it dies with the lines of requests it answered but had not
/// logged) a count above the audit log's is no violation; a shortfall still is, but for the
/// pod writes received within [`LOSS_WINDOW`] before one of the `disruptions` (a fault, a
/// replica that exited): a write committed whose answer never reached the controller (the
/// server or etcd killed in between) gets no `Successful*` Event, and a process that ends
/// drops the Events it had not sent yet, upstream's as ours.
pub fn lost_events(
    events: &[AuditEvent],
    k8s_events: &[Value],
    audit_gaps: bool,
    disruptions: &[Timestamp],
) -> Vec<String> {
    let pods = created_pods(events);
    let mut expected: BTreeMap<(String, String), [u64; 2]> = BTreeMap::new();
    for ((namespace, _), (_, pod)) in &pods {
        if let Some(rs) = controller_owner(pod, "ReplicaSet") {
            expected.entry((namespace.clone(), rs.to_string())).or_default()[0] += 1;
        }
    }
    let deletes = events.iter().filter(|e| e.resource == "pods" && e.verb == "delete" && e.subresource.is_empty());
    for delete in deletes.filter(|e| e.succeeded() && e.by_controller("replicaset-controller")) {
        let pod = pods.get(&(delete.namespace.clone(), delete.name.clone()));
        if let Some(rs) = pod.and_then(|(_, pod)| controller_owner(pod, "ReplicaSet")) {
            expected.entry((delete.namespace.clone(), rs.to_string())).or_default()[1] += 1;
        }
    }
    let mut observed: BTreeMap<(String, String), [u64; 2]> = BTreeMap::new();
    for event in k8s_events.iter().filter(|e| e["involvedObject"]["kind"] == "ReplicaSet") {
        let slot = match event["reason"].as_str() {
            Some("SuccessfulCreate") => 0,
            Some("SuccessfulDelete") => 1,
            _ => continue,
        };
        let object = &event["involvedObject"];
        let rs = (
            object["namespace"].as_str().unwrap_or_default().to_string(),
            object["name"].as_str().unwrap_or_default().to_string(),
        );
        observed.entry(rs).or_default()[slot] += event["count"].as_u64().unwrap_or(1);
    }
    let mut rejected: BTreeMap<String, u64> = BTreeMap::new();
    let event_writes =
        events.iter().filter(|e| e.resource == "events" && matches!(e.verb.as_str(), "create" | "patch"));
    for write in event_writes.filter(|e| (400..500).contains(&e.code) && e.code != 409) {
        if write.by_controller("replicaset-controller") {
            *rejected.entry(write.namespace.clone()).or_default() += 1;
        }
    }
    let pod_writes = events
        .iter()
        .filter(|e| e.resource == "pods" && matches!(e.verb.as_str(), "create" | "delete") && e.subresource.is_empty());
    for write in pod_writes.filter(|e| e.succeeded() && e.by_controller("replicaset-controller")) {
        let disrupted = disruptions.iter().any(|&at| {
            write.received <= at
                && at.duration_since(write.received)
                    <= SignedDuration::try_from(LOSS_WINDOW).unwrap_or(SignedDuration::MAX)
        });
        if disrupted {
            *rejected.entry(write.namespace.clone()).or_default() += 1;
        }
    }
    let mut violations = Vec::new();
    let mut shortfalls: BTreeMap<String, (u64, Vec<String>)> = BTreeMap::new();
    for (rs, audit) in &expected {
        let seen = observed.get(rs).copied().unwrap_or_default();
        let describe = || {
            format!(
                "ReplicaSet {}/{}: Events count {} created, {} deleted; the audit log shows {} creates, {} deletes",
                rs.0, rs.1, seen[0], seen[1], audit[0], audit[1]
            )
        };
        if (seen[0] > audit[0] || seen[1] > audit[1]) && !audit_gaps {
            violations.push(describe());
            continue;
        }
        let floor = (audit[0] + audit[1]).min(SPAM_BURST);
        let short = floor.saturating_sub(seen[0] + seen[1]);
        if short > 0 {
            let entry = shortfalls.entry(rs.0.clone()).or_default();
            entry.0 += short;
            entry.1.push(describe());
        }
    }
    for (namespace, (short, described)) in shortfalls {
        let allowed = rejected.get(&namespace).copied().unwrap_or(0);
        if short > allowed {
            violations.extend(
                described
                    .into_iter()
                    .map(|d| format!("{d} ({allowed} rejected Event writes or disrupted pod writes in {namespace})")),
            );
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(seconds: f64) -> String {
        let micros = (seconds * 1e6).round() as u64;
        format!("2026-01-01T00:{:02}:{:02}.{:06}Z", micros / 60_000_000, micros / 1_000_000 % 60, micros % 1_000_000)
    }

    /// One audit line: `verb resource ns/name` by `user` from `ip` received at `t`, completed
    /// 10 ms later, with a response object.
    #[allow(clippy::too_many_arguments)]
    fn line(
        verb: &str,
        resource: &str,
        ns: &str,
        name: &str,
        user: &str,
        ip: &str,
        t: f64,
        code: u16,
        response: Option<Value>,
    ) -> String {
        let mut e = json!({
            "kind": "Event", "stage": "ResponseComplete", "verb": verb,
            "user": {"username": user, "groups": if user.starts_with("system:serviceaccount:kube-system:") { json!([KUBE_SYSTEM_ACCOUNTS]) } else { json!([]) }},
            "userAgent": "kube-controller-manager/v1.36.2", "sourceIPs": [ip],
            "objectRef": {"resource": resource, "namespace": ns, "name": name},
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": at(t), "stageTimestamp": at(t + 0.01),
        });
        if let Some(response) = response {
            e["responseObject"] = response;
        }
        e.to_string()
    }

    fn pod(name: &str, rs: &str) -> Value {
        json!({"metadata": {"namespace": "ns", "name": name,
            "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "controller": true}]}})
    }

    const RS_USER: &str = "system:serviceaccount:kube-system:replicaset-controller";

    fn create(name: &str, rs: &str, t: f64) -> String {
        line("create", "pods", "ns", "", RS_USER, "127.0.0.2", t, 201, Some(pod(name, rs)))
    }

    fn delete(name: &str, t: f64) -> String {
        line("delete", "pods", "ns", name, RS_USER, "127.0.0.2", t, 200, None)
    }

    #[test]
    fn pods_created_for_an_owner_are_its_successful_creates_in_order() {
        let refused = line("create", "pods", "ns", "", RS_USER, "127.0.0.2", 3.0, 409, Some(pod("web-a-3", "web-a")));
        let other_namespace = create("web-a-4", "web-a", 4.0).replace(r#""namespace":"ns""#, r#""namespace":"other""#);
        let log = [create("web-a-1", "web-a", 1.0), create("web-b-1", "web-b", 1.5), create("web-a-2", "web-a", 2.0)]
            .into_iter()
            .chain([refused, other_namespace])
            .collect::<Vec<_>>()
            .join("\n");
        let events = parse(&log);
        assert_eq!(pods_created_for(&events, "ReplicaSet", "ns", "web-a"), ["web-a-1", "web-a-2"]);
        assert_eq!(pods_created_for(&events, "ReplicaSet", "ns", "web-b"), ["web-b-1"]);
        assert_eq!(pods_created_for(&events, "Job", "ns", "web-a"), Vec::<String>::new());
    }

    fn state() -> (Vec<Value>, Vec<Value>) {
        let deployment = json!({"metadata": {"namespace": "ns", "name": "web"}, "spec": {"replicas": 2}});
        let rs = |name: &str| {
            json!({"metadata": {"namespace": "ns", "name": name,
            "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": true}]}})
        };
        (vec![deployment], vec![rs("web-a"), rs("web-b")])
    }

    fn scale(rs: &str, replicas: i64, t: f64) -> String {
        let object = json!({"metadata": {"namespace": "ns", "name": rs}, "spec": {"replicas": replicas}});
        line(
            "update",
            "replicasets",
            "ns",
            rs,
            "system:serviceaccount:kube-system:deployment-controller",
            "127.0.0.2",
            t,
            200,
            Some(object),
        )
    }

    #[test]
    fn a_rollout_within_max_surge_passes_and_one_replica_too_many_fails() {
        let (deployments, replica_sets) = state();
        // 2 replicas, maxSurge 25% -> 1: the ReplicaSets' replicas add up to at most 3.
        let good = [
            scale("web-a", 2, 0.5),
            create("a1", "web-a", 1.0),
            create("a2", "web-a", 1.1),
            scale("web-b", 1, 1.5),
            create("b1", "web-b", 2.0),
            scale("web-a", 1, 2.5),
            delete("a1", 3.0),
            scale("web-b", 2, 3.2),
            create("b2", "web-b", 3.5),
            scale("web-a", 0, 3.8),
            delete("a2", 4.0),
        ];
        let events = parse(&good.join("\n"));
        assert_eq!(surge_violations(&events, &deployments, &replica_sets), Vec::<String>::new());
        assert_eq!(surge_peaks(&events, &deployments, &replica_sets), vec![("ns/web".to_string(), 3, 3)]);
        let bad = [scale("web-a", 2, 0.5), scale("web-b", 2, 1.5)];
        let violations = surge_violations(&parse(&bad.join("\n")), &deployments, &replica_sets);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("add up to 4"), "{violations:?}");
    }

    #[test]
    fn a_replica_set_creating_past_its_replicas_fails() {
        let (deployments, replica_sets) = state();
        let lines = [scale("web-a", 1, 0.5), create("a1", "web-a", 1.0), create("a2", "web-a", 1.1)];
        let violations = surge_violations(&parse(&lines.join("\n")), &deployments, &replica_sets);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("2 live pods"), "{violations:?}");
        // A scale-down the create raced with: the spec just before is allowed.
        let raced =
            [scale("web-a", 2, 0.5), create("a1", "web-a", 1.0), scale("web-a", 1, 1.05), create("a2", "web-a", 1.1)];
        assert_eq!(surge_violations(&parse(&raced.join("\n")), &deployments, &replica_sets), Vec::<String>::new());
    }

    /// A ReplicaSet update by a controller manager SIGKILLed mid-request: audited as a 504
    /// Timeout with no response, though it may have committed.
    fn scale_cut_off(rs: &str, replicas: i64, t: f64) -> String {
        let mut e: Value = serde_json::from_str(&scale(rs, replicas, t)).expect("an audit line");
        e.as_object_mut().expect("an object").remove("responseObject");
        e["responseStatus"] = json!({"code": 504, "status": "Failure", "reason": "Timeout",
            "message": "Timeout: request did not complete within requested timeout - context canceled"});
        e["requestObject"] = json!({"metadata": {"namespace": "ns", "name": rs}, "spec": {"replicas": replicas}});
        e.to_string()
    }

    #[test]
    fn a_write_cut_off_by_a_killed_leader_counts_as_possibly_applied() {
        let (deployments, replica_sets) = state();
        // The killed leader's 1 -> 2 committed; the next leader's ReplicaSet controller acts on it.
        let lines = [
            scale("web-b", 1, 0.5),
            create("b1", "web-b", 1.0),
            scale_cut_off("web-b", 2, 2.0),
            create("b2", "web-b", 5.0),
        ];
        assert_eq!(surge_violations(&parse(&lines.join("\n")), &deployments, &replica_sets), Vec::<String>::new());
        // Any other failure is no write.
        let refused = lines.join("\n").replace("\"code\":504", "\"code\":409");
        let violations = surge_violations(&parse(&refused), &deployments, &replica_sets);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("2 live pods"), "{violations:?}");
    }

    #[test]
    fn a_failed_create_and_a_namespace_deletecollection_are_counted_right() {
        let (deployments, replica_sets) = state();
        let lines = [
            scale("web-a", 2, 0.5),
            scale("web-b", 0, 0.6),
            create("a1", "web-a", 1.0),
            create("a2", "web-a", 1.1),
            line("create", "pods", "ns", "", RS_USER, "127.0.0.2", 1.2, 500, Some(pod("a3", "web-a"))),
            scale("web-a", 0, 1.9),
            scale("web-b", 3, 1.95),
            create("b1", "web-b", 2.0),
            line(
                "deletecollection",
                "pods",
                "ns",
                "",
                "system:serviceaccount:kube-system:namespace-controller",
                "127.0.0.2",
                3.0,
                200,
                None,
            ),
            create("b2", "web-b", 4.0),
            create("b3", "web-b", 4.1),
        ];
        let events = parse(&lines.join("\n"));
        assert_eq!(surge_violations(&events, &deployments, &replica_sets), Vec::<String>::new());
        // a1, a2 and b1 ended at the deletecollection; the failed create never counted.
        assert_eq!(surge_peaks(&events, &deployments, &replica_sets), vec![("ns/web".to_string(), 3, 3)]);
    }

    #[test]
    fn an_address_in_two_slices_or_twice_in_endpoints_is_a_duplicate() {
        let slice = |name: &str, ips: &[&str]| {
            json!({"metadata": {"namespace": "ns", "name": name, "labels": {
            "kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
            "addressType": "IPv4", "endpoints": ips.iter().map(|ip| json!({"addresses": [ip]})).collect::<Vec<_>>()})
        };
        let endpoints = |ips: &[&str]| {
            json!({"metadata": {"namespace": "ns", "name": "web"},
            "subsets": [{"addresses": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>()}]})
        };
        let ok = endpoint_duplicates(
            &[slice("web-1", &["10.0.0.1"]), slice("web-2", &["10.0.0.2"])],
            &[endpoints(&["10.0.0.1", "10.0.0.2"])],
        );
        assert_eq!(ok, Vec::<String>::new());
        let twice = endpoint_duplicates(
            &[slice("web-1", &["10.0.0.1"]), slice("web-2", &["10.0.0.1"])],
            &[endpoints(&["10.0.0.1", "10.0.0.1"])],
        );
        assert_eq!(twice.len(), 2, "{twice:?}");
        let mut other = slice("web-3", &["10.0.0.3"]);
        other["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = json!("someone-else");
        assert_eq!(endpoint_duplicates(&[slice("web-1", &["10.0.0.1"]), other], &[]).len(), 1);
    }

    fn lease(ip: &str, t: f64, code: u16) -> String {
        line("update", "leases", "kube-system", "kube-controller-manager", CONTROLLER_MANAGER_USER, ip, t, code, None)
    }

    fn write(ip: &str, t: f64) -> String {
        line(
            "update",
            "deployments",
            "ns",
            "web",
            "system:serviceaccount:kube-system:deployment-controller",
            ip,
            t,
            200,
            None,
        )
    }

    #[test]
    fn writes_follow_the_lease_with_the_outgoing_leaders_in_flight_requests_allowed() {
        let deadline = Duration::from_secs(3);
        // A leads 1-5 (last renewal at 5), B takes over at 12.
        let mut lines = vec![lease("127.0.0.2", 1.0, 200), write("127.0.0.2", 2.0), lease("127.0.0.2", 5.0, 200)];
        lines.extend([lease("127.0.0.3", 6.0, 409), lease("127.0.0.3", 12.0, 200), write("127.0.0.3", 13.0)]);
        let terms = lease_terms(&parse(&lines.join("\n")), "kube-controller-manager");
        assert_eq!(terms.len(), 2, "a 409 is no term: {terms:?}");
        assert_eq!(writer_violations(&parse(&lines.join("\n")), "kube-controller-manager", deadline), (vec![], 0));
        // A's write received 7.9 s after its renewal... within the renew deadline only if < 8.
        let mut late = lines.clone();
        late.push(write("127.0.0.2", 12.5));
        let (violations, _) = writer_violations(&parse(&late.join("\n")), "kube-controller-manager", deadline);
        assert_eq!(violations.len(), 1, "{violations:?}");
        let mut in_flight = lines.clone();
        in_flight.extend([lease("127.0.0.3", 6.5, 200), write("127.0.0.2", 7.0)]);
        let (violations, allowed) =
            writer_violations(&parse(&in_flight.join("\n")), "kube-controller-manager", deadline);
        assert_eq!((violations.len(), allowed), (0, 1), "{violations:?}");
        // Nobody's writes before any term are violations; another identity's are not counted.
        let early = [
            write("127.0.0.2", 0.5),
            line("update", "deployments", "ns", "web", "kubernetes-admin", "127.0.0.1", 0.6, 200, None),
            lease("127.0.0.2", 1.0, 200),
        ];
        assert_eq!(writer_violations(&parse(&early.join("\n")), "kube-controller-manager", deadline).0.len(), 1);
    }

    fn event(rs: &str, reason: &str, count: u64) -> Value {
        json!({"involvedObject": {"kind": "ReplicaSet", "namespace": "ns", "name": rs}, "reason": reason, "count": count})
    }

    #[test]
    fn replica_set_events_add_up_to_the_audit_logs_creates_and_deletes() {
        let lines = [
            create("a1", "web-a", 1.0),
            create("a2", "web-a", 1.1),
            delete("a1", 2.0),
            line("delete", "pods", "ns", "a2", "kubernetes-admin", "127.0.0.1", 2.5, 200, None),
        ];
        let events = parse(&lines.join("\n"));
        let good = [
            event("web-a", "SuccessfulCreate", 1),
            event("web-a", "SuccessfulCreate", 1),
            event("web-a", "SuccessfulDelete", 1),
        ];
        assert_eq!(lost_events(&events, &good, false, &[]), Vec::<String>::new());
        assert_eq!(lost_events(&events, &good[..2], false, &[]).len(), 1, "a lost SuccessfulDelete");
        assert_eq!(
            lost_events(&events, &[event("web-a", "SuccessfulCreate", 3)], false, &[]).len(),
            1,
            "one create too many"
        );
        // A killed kube-apiserver may not have logged a create it answered: an excess is no
        // violation then, a shortfall still is.
        let extra = [event("web-a", "SuccessfulCreate", 3), event("web-a", "SuccessfulDelete", 1)];
        assert_eq!(lost_events(&events, &extra, true, &[]), Vec::<String>::new());
        assert_eq!(lost_events(&events, &good[..1], true, &[]).len(), 1, "Events lost all the same");
        // Past the spam filter's burst, 25 Events are enough.
        let many: Vec<String> = (0..30).map(|i| create(&format!("p{i}"), "web-b", 1.0 + f64::from(i) * 0.01)).collect();
        let events = parse(&many.join("\n"));
        assert_eq!(lost_events(&events, &[event("web-b", "SuccessfulCreate", 25)], false, &[]), Vec::<String>::new());
        assert_eq!(lost_events(&events, &[event("web-b", "SuccessfulCreate", 24)], false, &[]).len(), 1);
        // An Event the server rejected (403) is not retried, as upstream's.
        let mut rejected = many.clone();
        rejected.push(line("create", "events", "ns", "", RS_USER, "127.0.0.2", 5.0, 403, None));
        let events = parse(&rejected.join("\n"));
        assert_eq!(lost_events(&events, &[event("web-b", "SuccessfulCreate", 24)], false, &[]), Vec::<String>::new());
        assert_eq!(lost_events(&events, &[event("web-b", "SuccessfulCreate", 23)], false, &[]).len(), 1);
    }

    #[test]
    fn events_of_pod_writes_just_before_a_disruption_may_be_lost() {
        let lines = [create("a1", "web-a", 1.0), create("a2", "web-a", 20.0)];
        let events = parse(&lines.join("\n"));
        let one = [event("web-a", "SuccessfulCreate", 1)];
        let time = |seconds: f64| at(seconds).parse::<Timestamp>().unwrap();
        assert_eq!(lost_events(&events, &one, false, &[]).len(), 1, "no disruption: a lost Event");
        assert_eq!(lost_events(&events, &one, true, &[time(25.0)]), Vec::<String>::new(), "a2 just before");
        assert_eq!(lost_events(&events, &one, true, &[time(35.0)]).len(), 1, "a2 long before");
        assert_eq!(lost_events(&events, &one, true, &[time(15.0)]).len(), 1, "a2 after");
        assert_eq!(lost_events(&events, &[], true, &[time(25.0)]).len(), 1, "one write disrupted, not two");
    }
}
