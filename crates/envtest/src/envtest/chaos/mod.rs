//! The chaos suite's library (issue 21): control-plane and leader faults during real work on a
//! real control plane, invariants read from kube-apiserver's audit log and the final state,
//! and the time to converge after each fault. Shared by `tests/runtime/chaos.rs` (CI) and
//! `benches/chaos.rs` (every fault × workload, our binary and upstream's).
//!
//! A [`Bed`] is one [`ControlPlane`] with simulated nodes and controller-manager replicas of
//! one [`Side`], each behind its own [`Proxy`] from its own source address. A [`Workload`] is
//! prepared, then changed, then a fault is injected (any `FnOnce(&mut Bed)`, e.g.
//! [`Fault::inject`]), and [`Bed::converge`] times how long the workload takes to converge
//! after it; [`Bed::invariants`] checks the audit log and the final state ([`audit`]).
//!
//! ```text
//! let mut bed = Bed::start(Side::Ours, &binary, 1, &[])?;
//! let workload = workloads::ROLLOUT;
//! (workload.prepare)(&bed)?;
//! (workload.change)(&bed)?;
//! Fault::KillApiserver.inject(&mut bed)?;          // or any closure over &mut Bed
//! let took = bed.converge(&workload)?;
//! assert!(bed.invariants(Duration::from_secs(12))?.violations().is_empty());
//! ```

pub mod audit;
pub mod proxy;
pub mod workloads;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use self::proxy::Proxy;
pub use self::workloads::Workload;
use super::ControlPlane;
use super::jsonapi::{Error as JsonApiError, JsonApi};
use super::process::{self, OwnedProcess};
use super::sidebyside::{Side, controller_manager_args, node_options};
use crate::apimachinery::errors::BoxError;
use crate::client::{self, Client, ClientOptions};
use crate::sandbox::nodes::SimulatedNodes;

/// The controller manager's Lease in kube-system.
pub const LEASE: &str = "kube-controller-manager";
/// How long a workload may take to converge after a fault.
pub const CONVERGE_TIMEOUT: Duration = Duration::from_secs(120);
/// Simulated nodes of every bed (`node-1` …).
const NODES: usize = 3;

/// Why a chaos bed did not start, a fault could not be injected or a workload did not converge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control plane did not start, or a fault on it (a restart) failed.
    #[error(transparent)]
    TestBed(#[from] super::Error),
    /// A replica did not start.
    #[error(transparent)]
    Process(#[from] process::Error),
    /// A replica's proxy did not start.
    #[error(transparent)]
    Proxy(#[from] proxy::Error),
    /// The admin client could not be built, or a request body encoded.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// The simulated nodes did not start.
    #[error("{0}")]
    Nodes(#[source] BoxError),
    /// The log folder cannot be created.
    #[error("{}: {source}", .dir.display())]
    LogDir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// kube-apiserver's URL is not `https://<ip>:<port>`.
    #[error("https://<ip>:<port>")]
    ApiserverAddress,
    /// A replica's kubeconfig cannot be read or written.
    #[error(transparent)]
    Kubeconfig(std::io::Error),
    /// The audit log cannot be read.
    #[error("the audit log: {source}")]
    AuditLog {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A request failed, or its answer is not JSON (`GET /api/v1/nodes: …`).
    #[error(transparent)]
    Request(#[from] JsonApiError),
    /// A wait's check still failed when its time ran out.
    #[error("{what}: {source}")]
    Check {
        /// What was waited for.
        what: String,
        /// The check's last failure.
        #[source]
        source: Box<Error>,
    },
    /// What was waited for did not come in time.
    #[error("timed out after {timeout:?} waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        timeout: Duration,
    },
    /// A replica exited otherwise than for a lost Lease.
    #[error("replica {index} exited ({status}), not for a lost Lease:\n{output}")]
    ReplicaExited {
        /// The replica.
        index: usize,
        /// How it ended.
        status: std::process::ExitStatus,
        /// The last lines of its log.
        output: String,
    },
    /// The leader to kill has no running process.
    #[error("the leader is not running")]
    LeaderNotRunning,
    /// A workload found the cluster otherwise than it expects (the message says how).
    #[error("{0}")]
    Workload(String),
}

/// One controller-manager process and its way to the API server.
pub struct Replica {
    /// The process (SIGKILL, SIGSTOP it through this).
    pub process: OwnedProcess,
    /// Its own way to kube-apiserver, from its own source address.
    pub proxy: Proxy,
    /// Its log (`-v=6`: every request).
    pub log: PathBuf,
}

/// How a replica is run: `program`, then `prefix`, then the controller manager's flags. A
/// binary run directly has no prefix; a container is e.g. `ctr … run … <image> <id>
/// kube-controller-manager`, whose `ctr run` passes signals on and exits with the task's status.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Whose controller manager it is.
    pub side: Side,
    /// What is executed.
    pub program: PathBuf,
    /// The arguments before the controller manager's flags.
    pub prefix: Vec<String>,
}

impl Launch {
    /// `side`'s binary at `path`, run directly.
    pub fn binary(side: Side, path: &Path) -> Launch {
        Launch { side, program: path.to_path_buf(), prefix: Vec::new() }
    }
}

/// A control plane, simulated nodes, an admin client and the controller-manager replicas.
pub struct Bed {
    // Field order is drop order: the replicas and nodes go before the control plane.
    /// The replicas by index (`None` while one is down); replica `i` comes from [`replica_source`]`(i)`.
    pub replicas: Vec<Option<Replica>>,
    /// The simulated kubelets and scheduler.
    pub nodes: SimulatedNodes,
    /// A cluster admin (source address 127.0.0.1).
    pub admin: Client,
    /// etcd and kube-apiserver.
    pub plane: ControlPlane,
    /// How replica `i` is run (a bed may mix upstream's binary and ours, binaries and containers).
    launches: Vec<Launch>,
    /// kubeadm's controller-manager.conf, aimed at kube-apiserver.
    kubeconfig: PathBuf,
    flags: Vec<String>,
    /// Where the replicas' logs go (kept after the bed).
    log_dir: PathBuf,
    /// When a fault began or a replica was found exited: the Events of pod writes just before
    /// may be lost with them (invariant 4, [`audit::lost_events`]).
    disruptions: Vec<jiff::Timestamp>,
}

impl Bed {
    /// A fresh control plane with [`NODES`] simulated nodes (Ready, schedulable) and `count`
    /// replicas of `binary` started as kubeadm starts kube-controller-manager, with `flags`
    /// added (e.g. the leader-election terms, a workload's).
    pub fn start(side: Side, binary: &Path, count: usize, flags: &[&str], log_dir: &Path) -> Result<Bed, Error> {
        std::fs::create_dir_all(log_dir).map_err(|source| Error::LogDir { dir: log_dir.to_path_buf(), source })?;
        let plane = ControlPlane::start()?;
        let admin = Client::new(plane.admin_config(), ClientOptions { qps: -1.0, ..ClientOptions::default() })?
            .for_controller("chaos");
        let (_, kubeconfig) = plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf"))?;
        let names: Vec<String> = (1..=NODES).map(|i| format!("node-{i}")).collect();
        let nodes =
            SimulatedNodes::start(plane.admin_config(), names, node_options()).map_err(|e| Error::Nodes(e.into()))?;
        let mut bed = Bed {
            replicas: Vec::new(),
            nodes,
            admin,
            plane,
            launches: vec![Launch::binary(side, binary); count],
            kubeconfig,
            flags: flags.iter().map(|f| f.to_string()).collect(),
            log_dir: log_dir.to_path_buf(),
            disruptions: Vec::new(),
        };
        for index in 0..count {
            let _ = std::fs::remove_file(bed.log_path(index));
            let replica = bed.start_replica(index)?;
            bed.replicas.push(Some(replica));
        }
        bed.wait("every node Ready and schedulable", Duration::from_secs(90), |bed| {
            let nodes = bed.list("/api/v1/nodes")?;
            let ready = nodes.iter().filter(|n| {
                let taints = n["spec"]["taints"].as_array().map(Vec::as_slice).unwrap_or_default();
                condition(n, "Ready") == Some("True")
                    && !taints.iter().any(|t| t["key"].as_str().is_some_and(|k| k.starts_with("node.kubernetes.io/")))
            });
            Ok((ready.count() == NODES).then_some(()))
        })?;
        Ok(bed)
    }

    /// Adds replica `replicas.len()`, run as `launch` says, from a source address of its own
    /// (so the audit log tells it from the replica it may replace), and starts it; its index.
    pub fn add_replica(&mut self, launch: Launch) -> Result<usize, Error> {
        let index = self.replicas.len();
        self.launches.push(launch);
        let _ = std::fs::remove_file(self.log_path(index));
        let replica = self.start_replica(index)?;
        self.replicas.push(Some(replica));
        Ok(index)
    }

    /// Stops replica `index` as its supervisor stops it (systemd's stop, the kubelet removing a
    /// static Pod): SIGTERM, up to `grace` to exit, then SIGKILL. A leader's Events and writes
    /// in flight may go with it (invariant 4 allows for them). Its exit status.
    pub fn stop_replica(&mut self, index: usize, grace: Duration) -> Option<std::process::ExitStatus> {
        let mut replica = self.replicas.get_mut(index)?.take()?;
        self.disruptions.push(jiff::Timestamp::now());
        replica.process.stop(grace)
    }

    /// The folder of kubeadm's files that the replicas read: their kubeconfigs, the cluster CA
    /// and its key, the service-account key (a container of a replica mounts it).
    pub fn kubeadm_dir(&self) -> &Path {
        self.kubeconfig.parent().unwrap_or(&self.kubeconfig)
    }

    /// Whose binary replica `index` runs.
    pub fn side(&self, index: usize) -> Option<Side> {
        self.launches.get(index).map(|launch| launch.side)
    }

    /// Replica `index`'s log file (`ours-0.log`, `upstream-3.log`, …).
    pub fn log_path(&self, index: usize) -> PathBuf {
        let side = self.launches.get(index).map_or("replica", |launch| launch.side.name());
        self.log_dir.join(format!("{side}-{index}.log"))
    }

    /// Starts replica `index` (again, after it exited or was killed), through a new proxy
    /// from the same source address; its log is appended to.
    pub fn start_replica(&mut self, index: usize) -> Result<Replica, Error> {
        let upstream: SocketAddr =
            self.plane.url().strip_prefix("https://").and_then(|a| a.parse().ok()).ok_or(Error::ApiserverAddress)?;
        let proxy = Proxy::start(upstream, replica_source(index))?;
        let text = std::fs::read_to_string(&self.kubeconfig).map_err(Error::Kubeconfig)?;
        let kubeconfig = self.kubeconfig.with_file_name(format!("controller-manager-{index}.conf"));
        std::fs::write(&kubeconfig, text.replace(self.plane.url(), &proxy.url())).map_err(Error::Kubeconfig)?;
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        let launch = &self.launches[index];
        let mut command = Command::new(&launch.program);
        command.args(&launch.prefix).args(controller_manager_args(launch.side, &kubeconfig, &flags));
        let log = self.log_path(index);
        let process = OwnedProcess::spawn(&format!("kube-controller-manager {index}"), command, &log)?;
        Ok(Replica { process, proxy, log })
    }

    /// Restarts replica `index` as systemd would (`Restart=always`) once it has exited.
    pub fn restart_replica(&mut self, index: usize) -> Result<(), Error> {
        if let Some(mut old) = self.replicas[index].take() {
            old.process.stop(Duration::from_secs(5));
        }
        let replica = self.start_replica(index)?;
        self.replicas[index] = Some(replica);
        Ok(())
    }

    /// The replica whose address last wrote the Lease successfully (from the audit log: the
    /// same for both binaries, whatever identity they take).
    pub fn leader(&self) -> Result<Option<usize>, Error> {
        let events = self.audit_events()?;
        let terms = audit::lease_terms(&events, LEASE);
        let Some(term) = terms.last() else { return Ok(None) };
        Ok((0..self.replicas.len()).find(|&i| replica_source(i).to_string() == term.source_ip))
    }

    /// The controller manager's Lease, as stored.
    pub fn lease(&self) -> Result<Option<Value>, Error> {
        self.get(&format!("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{LEASE}"))
    }

    /// Waits until a replica other than `not` holds the Lease: polls the Lease, and while it
    /// has a holder reads the audit log, which says which replica wrote it last (the same for
    /// both binaries, whatever identity they take). No holder is taken as `not`'s for having
    /// come first: the hand-over may be over before the first poll (ours takes a released Lease
    /// within milliseconds); nor for an audit log that has yet to show the new holder's write.
    /// Returns the replica and the Lease.
    pub fn wait_leader(&self, not: Option<usize>, timeout: Duration) -> Result<(usize, Value), Error> {
        self.wait("a leader", timeout, |bed| {
            let Some(lease) = bed.lease()? else { return Ok(None) };
            if lease["spec"]["holderIdentity"].as_str().unwrap_or_default().is_empty() {
                return Ok(None);
            }
            Ok(bed.leader()?.filter(|&leader| Some(leader) != not).map(|leader| (leader, lease)))
        })
    }

    /// The audit log so far.
    pub fn audit_events(&self) -> Result<Vec<audit::AuditEvent>, Error> {
        let text = std::fs::read_to_string(self.plane.audit_log()).map_err(|source| Error::AuditLog { source })?;
        Ok(audit::parse(&text))
    }

    /// Polls `check` until it gives a value; fails after `timeout`.
    pub fn wait<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Bed) -> Result<Option<T>, Error>,
    ) -> Result<T, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            // A request failing while a fault lasts is no answer yet.
            match check(self) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(e) if Instant::now() > deadline => {
                    return Err(Error::Check { what: what.to_string(), source: Box::new(e) });
                }
                Err(_) => {}
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: what.to_string(), timeout });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until `workload` converged; the time it took.
    pub fn converge(&self, workload: &Workload) -> Result<Duration, Error> {
        let started = Instant::now();
        self.wait(&format!("{} to converge", workload.name), CONVERGE_TIMEOUT, workload.converged)?;
        Ok(started.elapsed())
    }

    /// Starts again every replica that has exited, as its supervisor would (systemd's
    /// `Restart=always`, the kubelet for a static Pod); the indexes restarted. A leader cut off
    /// from kube-apiserver past its renew deadline (a restart that takes longer on a loaded
    /// machine) exits with `leaderelection lost`, as upstream's does: the fault's doing, not
    /// the workload's.
    /// Any other exit (a panic, status 2) is an error, not restarted: it would hide a crash.
    pub fn restart_exited(&mut self) -> Result<Vec<usize>, Error> {
        let mut restarted = Vec::new();
        for index in 0..self.replicas.len() {
            let Some(replica) = self.replicas[index].as_mut() else { continue };
            let Some(status) = replica.process.exited() else { continue };
            let log = replica.process.log_tail(20);
            if status.code() != Some(1) || !log.contains("leaderelection lost") {
                return Err(Error::ReplicaExited { index, status, output: log });
            }
            self.disruptions.push(jiff::Timestamp::now());
            self.restart_replica(index)?;
            restarted.push(index);
        }
        Ok(restarted)
    }

    /// [`Bed::converge`] with the replicas supervised ([`Bed::restart_exited`]) meanwhile.
    pub fn converge_supervised(&mut self, workload: &Workload) -> Result<Duration, Error> {
        let started = Instant::now();
        loop {
            self.restart_exited()?;
            if (workload.converged)(self).ok().flatten().is_some() {
                return Ok(started.elapsed());
            }
            if started.elapsed() > CONVERGE_TIMEOUT {
                let what = format!("{} to converge", workload.name);
                return Err(Error::Timeout { what, timeout: CONVERGE_TIMEOUT });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Checks the invariants on the audit log and the server's state now (see [`audit`]);
    /// `leading_after_renewal` is how long a replica may go on leading after its last
    /// successful renewal: its `--leader-elect-renew-deadline` and one
    /// `--leader-elect-retry-period` (see [`audit::writer_violations`]).
    pub fn invariants(&self, leading_after_renewal: Duration) -> Result<Invariants, Error> {
        let events = self.audit_events()?;
        let deployments = self.list("/apis/apps/v1/deployments")?;
        let replica_sets = self.list("/apis/apps/v1/replicasets")?;
        let slices = self.list("/apis/discovery.k8s.io/v1/endpointslices")?;
        let endpoints = self.list("/api/v1/endpoints")?;
        let k8s_events = self.list("/api/v1/events")?;
        let (writers, in_flight) = audit::writer_violations(&events, LEASE, leading_after_renewal);
        Ok(Invariants {
            surge: audit::surge_violations(&events, &deployments, &replica_sets),
            pods_over_surge: audit::surge_peaks(&events, &deployments, &replica_sets)
                .into_iter()
                .filter(|(_, peak, bound)| peak > bound)
                .map(|(deployment, peak, bound)| format!("{deployment}: {peak} pods, bound {bound}"))
                .collect(),
            endpoints: audit::endpoint_duplicates(&slices, &endpoints),
            writers,
            in_flight_writes: in_flight,
            // A deleted namespace's Events went with it: only the namespaces still there count.
            events: audit::lost_events(
                &in_live_namespaces(events, &self.list("/api/v1/namespaces")?),
                &k8s_events,
                self.plane.audit_may_have_gaps(),
                &self.disruptions,
            ),
        })
    }

    /// [`Bed::invariants`] once they hold, or after `timeout` with what they found: Events
    /// are posted asynchronously (and retried), so the last ones may land after convergence.
    pub fn settled_invariants(&self, leading_after_renewal: Duration, timeout: Duration) -> Result<Invariants, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.invariants(leading_after_renewal)?;
            if found.violations().is_empty() || Instant::now() > deadline {
                return Ok(found);
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// GETs an object; `None` when it does not exist.
    pub fn get(&self, path: &str) -> Result<Option<Value>, Error> {
        Ok(JsonApi(&self.admin).get(path)?)
    }

    /// The items of a list.
    pub fn list(&self, path: &str) -> Result<Vec<Value>, Error> {
        Ok(JsonApi(&self.admin).list(path)?)
    }

    /// POSTs `object` to the collection at `path`.
    pub fn create(&self, path: &str, object: Value) -> Result<Value, Error> {
        Ok(JsonApi(&self.admin).create(path, &object)?)
    }

    /// A JSON merge patch.
    pub fn patch(&self, path: &str, patch: Value) -> Result<Value, Error> {
        Ok(JsonApi(&self.admin).patch(path, &patch)?)
    }

    /// DELETE (the kind's default propagation).
    pub fn delete(&self, path: &str) -> Result<(), Error> {
        Ok(JsonApi(&self.admin).delete(path, None)?)
    }

    /// Stops every replica (SIGTERM) and the nodes; the control plane goes when dropped.
    pub fn stop(mut self) {
        for replica in self.replicas.iter_mut().flatten() {
            replica.process.stop(Duration::from_secs(10));
        }
    }
}

/// The audit events of objects in namespaces that still exist (and of cluster-scoped ones).
fn in_live_namespaces(events: Vec<audit::AuditEvent>, namespaces: &[Value]) -> Vec<audit::AuditEvent> {
    let live: Vec<&str> = namespaces.iter().filter_map(|n| n["metadata"]["name"].as_str()).collect();
    events.into_iter().filter(|e| e.namespace.is_empty() || live.contains(&e.namespace.as_str())).collect()
}

/// The source address of replica `index`: 127.0.0.2, .3, … (127.0.0.1 is everyone else).
pub fn replica_source(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, 2 + u8::try_from(index).expect("a few replicas"))
}

/// The status of condition `type` of an object.
pub fn condition<'v>(object: &'v Value, type_: &str) -> Option<&'v str> {
    super::sidebyside::condition(object, type_)
}

/// What the invariants found; empty lists when they held.
#[derive(Debug, Default)]
pub struct Invariants {
    /// 1: ReplicaSets' replicas above a Deployment's replicas + maxSurge, or a ReplicaSet
    /// creating past its replicas.
    pub surge: Vec<String>,
    /// A figure, not a violation: Deployments whose live pods passed replicas + maxSurge while
    /// an old ReplicaSet's scale-down was pending (see [`audit::surge_violations`]).
    pub pods_over_surge: Vec<String>,
    /// 2: duplicate Endpoints / EndpointSlices.
    pub endpoints: Vec<String>,
    /// 3: writes from an address not holding the Lease.
    pub writers: Vec<String>,
    /// Writes of an outgoing leader let through by the renew-deadline allowance.
    pub in_flight_writes: usize,
    /// 4: ReplicaSet Events lost beyond upstream's aggregation.
    pub events: Vec<String>,
}

impl Invariants {
    /// Every violation, prefixed with its invariant.
    pub fn violations(&self) -> Vec<String> {
        let tag = |n: &str, list: &[String]| list.iter().map(|v| format!("{n}: {v}")).collect::<Vec<_>>();
        [
            tag("surge", &self.surge),
            tag("endpoints", &self.endpoints),
            tag("one writer", &self.writers),
            tag("events", &self.events),
        ]
        .concat()
    }
}

/// The faults the suite injects; any other is a closure over the [`Bed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: the baseline.
    None,
    /// kube-apiserver SIGKILLed and started again.
    KillApiserver,
    /// etcd SIGKILLed and started again on the same data.
    KillEtcd,
    /// etcd compacted past kube-apiserver's watches ([`ControlPlane::compact_etcd`]): they
    /// end, its watch cache lists again, clients relist (410 Gone).
    CompactEtcd,
    /// kube-apiserver SIGSTOPped this long, then SIGCONTed.
    StallApiserver(Duration),
    /// etcd SIGSTOPped this long, then SIGCONTed: kube-apiserver answers from its watch cache
    /// but every write, and so every Lease renewal, hangs.
    StallEtcd(Duration),
    /// The leading replica SIGKILLed; another takes over once the Lease expires.
    KillLeader,
}

impl Fault {
    /// Its name in the bench's table.
    pub fn name(self) -> String {
        match self {
            Fault::None => "none".into(),
            Fault::KillApiserver => "kube-apiserver SIGKILL".into(),
            Fault::KillEtcd => "etcd SIGKILL".into(),
            Fault::CompactEtcd => "etcd compaction (410)".into(),
            Fault::StallApiserver(d) => format!("kube-apiserver SIGSTOP {}s", d.as_secs()),
            Fault::StallEtcd(d) => format!("etcd SIGSTOP {}s", d.as_secs()),
            Fault::KillLeader => "leader SIGKILL".into(),
        }
    }

    /// Injects the fault and returns once it is over (the process restarted, resumed).
    pub fn inject(self, bed: &mut Bed) -> Result<(), Error> {
        if self != Fault::None {
            bed.disruptions.push(jiff::Timestamp::now());
        }
        match self {
            Fault::None => Ok(()),
            Fault::KillApiserver => {
                bed.plane.apiserver().signal(libc::SIGKILL);
                Ok(bed.plane.restart_apiserver()?)
            }
            Fault::KillEtcd => {
                bed.plane.etcd().signal(libc::SIGKILL);
                Ok(bed.plane.restart_etcd()?)
            }
            Fault::CompactEtcd => {
                bed.plane.compact_etcd()?;
                Ok(())
            }
            Fault::StallApiserver(d) => {
                bed.plane.apiserver().signal(libc::SIGSTOP);
                std::thread::sleep(d);
                bed.plane.apiserver().signal(libc::SIGCONT);
                Ok(())
            }
            Fault::StallEtcd(d) => {
                bed.plane.etcd().signal(libc::SIGSTOP);
                std::thread::sleep(d);
                bed.plane.etcd().signal(libc::SIGCONT);
                Ok(())
            }
            Fault::KillLeader => {
                let (leader, _) = bed.wait_leader(None, Duration::from_secs(60))?;
                let replica = bed.replicas[leader].as_mut().ok_or(Error::LeaderNotRunning)?;
                replica.process.signal(libc::SIGKILL);
                replica.process.exited();
                Ok(())
            }
        }
    }
}

/// `{"metadata": {"name": …}}`-style helper for the workloads.
fn named(name: &str) -> Value {
    json!({"metadata": {"name": name}})
}
