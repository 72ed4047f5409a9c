//! The Lease lock (client-go's `resourcelock.LeaseLock`), served by a worker thread.
//!
//! A renewal must be given up at its deadline even when the API server never answers: a
//! leader that waited for a hung request past its renew deadline could still believe it leads
//! after a standby took over. The client has no per-request deadline, so the requests run on a
//! worker thread that owns the Lease, and the election thread waits for each answer no longer
//! than its deadline (or until the elector is stopped). A request the election thread gave up
//! on may still complete; the worker then keeps the Lease it got back, so the next write is
//! still based on the object's current resourceVersion. Jobs not started by their deadline are
//! dropped, so an abandoned renewal never reaches the server late.

use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::election::{Lock, LockError};
use super::record::Record;
use crate::client::{Api, Client, PostParams};

/// The component named in the Events we record, as upstream's recorder source.
const COMPONENT: &str = "kube-controller-manager";

/// The Lease and the API calls on it, owned by the worker thread.
struct LeaseLock {
    leases: Api<Lease>,
    events: Api<Event>,
    namespace: String,
    name: String,
    identity: String,
    /// The Lease as last read or written: updates carry its resourceVersion.
    lease: Option<Lease>,
}

impl LeaseLock {
    fn get(&mut self) -> Result<Option<Record>, LockError> {
        let lease = self.leases.get_opt(&self.name)?;
        let record = lease.as_ref().map(|l| Record::from_spec(l.spec.as_ref().unwrap_or(&LeaseSpec::default())));
        self.lease = lease;
        Ok(record)
    }

    fn create(&mut self, record: &Record) -> Result<(), LockError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record.to_spec()),
        };
        self.lease = Some(self.leases.create(&lease, &PostParams::default())?);
        Ok(())
    }

    fn update(&mut self, record: &Record) -> Result<(), LockError> {
        let Some(mut lease) = self.lease.clone() else {
            return Err(LockError::NotInitialized);
        };
        lease.spec = Some(record.to_spec());
        self.lease = Some(self.leases.replace(&self.name, &lease, &PostParams::default())?);
        Ok(())
    }

    /// Records a `LeaderElection` Event on the Lease: "<identity> <what>".
    fn record_event(&self, what: &str) -> Result<(), LockError> {
        let Some(lease) = &self.lease else {
            return Err(LockError::NoLease);
        };
        let event = leader_event(lease, &format!("{} {what}", self.identity), Timestamp::now());
        self.events.create(&event, &PostParams::default())?;
        Ok(())
    }

    fn run(&mut self, op: Op) -> Result<Done, LockError> {
        match op {
            Op::Get => self.get().map(Done::Read),
            Op::Create(record) => self.create(&record).map(|()| Done::Written),
            Op::Update(record) => self.update(&record).map(|()| Done::Written),
            Op::Event(what) => self.record_event(&what).map(|()| Done::Written),
        }
    }
}

/// A core/v1 Event about `lease`, shaped as client-go's recorder makes it (name
/// `<lease>.<hex unix nanoseconds>`, reason `LeaderElection`, type Normal).
fn leader_event(lease: &Lease, message: &str, now: Timestamp) -> Event {
    let name = lease.metadata.name.clone().unwrap_or_default();
    let namespace = lease.metadata.namespace.clone();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: namespace.clone(),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            kind: Some("Lease".into()),
            api_version: Some("coordination.k8s.io/v1".into()),
            name: Some(name),
            namespace,
            uid: lease.metadata.uid.clone(),
            resource_version: lease.metadata.resource_version.clone(),
            ..ObjectReference::default()
        },
        reason: Some("LeaderElection".into()),
        message: Some(message.to_string()),
        type_: Some("Normal".into()),
        source: Some(EventSource { component: Some(COMPONENT.into()), host: None }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(String::new()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Event::default()
    }
}

/// What the election thread asks of the worker.
enum Op {
    Get,
    Create(Record),
    Update(Record),
    /// Record an Event "<identity> <what>"; nobody waits for it.
    Event(String),
}

/// What the worker answers.
enum Done {
    Read(Option<Record>),
    Written,
}

struct Job {
    op: Op,
    /// The job is dropped if it has not started by then.
    deadline: Instant,
    /// Where the answer goes; `None` for fire-and-forget jobs.
    reply: Option<Sender<Result<Done, LockError>>>,
}

/// The election thread's handle on the Lease: every call waits at most until its deadline,
/// and not at all once the elector is stopping (unless told to [`RemoteLock::ignore_stop`]).
pub struct RemoteLock {
    jobs: Sender<Job>,
    /// Disconnected when the elector stops.
    stop: Receiver<()>,
    honour_stop: bool,
    describe: String,
}

impl RemoteLock {
    /// Starts the worker for the Lease `namespace/name`. The worker ends once this handle is
    /// dropped and its current request is over.
    pub fn spawn(
        client: &Client,
        namespace: &str,
        name: &str,
        identity: &str,
        stop: Receiver<()>,
    ) -> std::io::Result<RemoteLock> {
        let lock = LeaseLock {
            leases: Api::namespaced(client, namespace),
            events: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease: None,
        };
        let (jobs, queue) = crossbeam_channel::unbounded();
        std::thread::Builder::new().name("leader-election-api".into()).spawn(move || serve(lock, &queue))?;
        Ok(RemoteLock { jobs, stop, honour_stop: true, describe: format!("{namespace}/{name}") })
    }

    /// Lets calls run to their deadline even after the elector was told to stop (to release).
    pub fn ignore_stop(&mut self) {
        self.honour_stop = false;
    }

    /// Records a `LeaderElection` Event "<identity> <what>" on the Lease, without waiting.
    pub fn record_event(&self, what: &str, deadline: Instant) {
        let job = Job { op: Op::Event(what.to_string()), deadline, reply: None };
        if self.jobs.send(job).is_err() {
            log::warn!("cannot record the leader election event \"{what}\": the worker has stopped");
        }
    }

    fn call(&self, op: Op, deadline: Instant) -> Result<Done, LockError> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.jobs.send(Job { op, deadline, reply: Some(reply) }).map_err(|_| LockError::WorkerStopped)?;
        let never = crossbeam_channel::never();
        let stop = if self.honour_stop { &self.stop } else { &never };
        let timeout = deadline.saturating_duration_since(Instant::now());
        crossbeam_channel::select! {
            recv(answer) -> done => done.unwrap_or(Err(LockError::Dropped)),
            recv(stop) -> _ => Err(LockError::Cancelled),
            default(timeout) => Err(LockError::Deadline),
        }
    }

    fn write(&self, op: Op, deadline: Instant) -> Result<(), LockError> {
        self.call(op, deadline).map(|_| ())
    }
}

impl Lock for RemoteLock {
    fn describe(&self) -> &str {
        &self.describe
    }

    fn get(&mut self, deadline: Instant) -> Result<Option<Record>, LockError> {
        match self.call(Op::Get, deadline)? {
            Done::Read(record) => Ok(record),
            Done::Written => Err(LockError::UnexpectedAnswer),
        }
    }

    fn create(&mut self, record: &Record, deadline: Instant) -> Result<(), LockError> {
        self.write(Op::Create(record.clone()), deadline)
    }

    fn update(&mut self, record: &Record, deadline: Instant) -> Result<(), LockError> {
        self.write(Op::Update(record.clone()), deadline)
    }
}

/// The worker's loop: one job at a time, in order, until the handle is dropped.
fn serve(mut lock: LeaseLock, queue: &Receiver<Job>) {
    for job in queue {
        if Instant::now() >= job.deadline {
            log::debug!("leader election: dropping a request that could not start before its deadline");
            continue;
        }
        let result = lock.run(job.op);
        match (job.reply, result) {
            (Some(reply), result) => {
                let _ = reply.send(result);
            }
            (None, Err(e)) => log::warn!("server rejected leader election event on {}: {e}", lock.name),
            (None, Ok(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_shaped_like_client_go_recorder_events() {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some("kube-controller-manager".into()),
                namespace: Some("kube-system".into()),
                uid: Some("u-1".into()),
                resource_version: Some("42".into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        let now: Timestamp = "2026-11-22T10:00:00.5Z".parse().expect("timestamp");
        let event = leader_event(&lease, "host_1 became leader", now);
        assert_eq!(event.metadata.name.as_deref(), Some("kube-controller-manager.18ea55ac6c48a500"));
        assert_eq!(event.metadata.namespace.as_deref(), Some("kube-system"));
        let reference = &event.involved_object;
        assert_eq!(reference.kind.as_deref(), Some("Lease"));
        assert_eq!(reference.api_version.as_deref(), Some("coordination.k8s.io/v1"));
        assert_eq!(reference.uid.as_deref(), Some("u-1"));
        assert_eq!(event.reason.as_deref(), Some("LeaderElection"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert_eq!(event.message.as_deref(), Some("host_1 became leader"));
        assert_eq!(event.source.and_then(|s| s.component).as_deref(), Some(COMPONENT));
    }
}
