//! The chaos suite's CI tier (issue 21): faults during real work, then the invariants read
//! from kube-apiserver's audit log and the final state (`kcm_envtest::envtest::chaos`).
//!
//! Real server only: the faults are the real control plane's (etcd and kube-apiserver killed,
//! stalled, etcd compacted) and the invariants read kube-apiserver's audit log; the sandbox
//! has neither processes to kill nor that log. Each test combines several faults on one
//! control plane to pay its start-up once. Times to converge and to fail over are printed;
//! bounds are client-go's guarantees (and our binary's shutdown bound) plus slack for a loaded
//! 2-core machine, measured from a moment when only the hand-over is left to happen. The longer
//! run, every fault × workload with our binary and upstream's, is `benches/chaos.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kcm_envtest::envtest::chaos::{Bed, Fault, audit, replica_source, workloads};
use kcm_envtest::envtest::sidebyside::Side;
use serde_json::Value;

use crate::harness::{self, Backend};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
/// Short leader-election terms, so that failovers fit a CI test: a SIGKILLed leader's Lease
/// expires after 6 s; a leader that cannot renew gives up after 3 s.
const LEASE: Duration = Duration::from_secs(6);
const RENEW_DEADLINE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);
const TERMS: &[&str] =
    &["--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"];
/// client-go's `JitterFactor`: a candidate retries every retry period × [1, 2.2).
const JITTER: f64 = 1.2;
/// Room for a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(8);
/// How long a SIGTERMed leader may take to stop before it releases the Lease (renewing it
/// meanwhile): its syncs in flight and pending Events get 10 s (`--controller-shutdown-timeout`'s
/// default), an Event write in flight 5 s more (`ControllerSet::shut_down`).
const SHUTDOWN: Duration = Duration::from_secs(15);
/// How long the last Events may take to land after convergence.
const SETTLE: Duration = Duration::from_secs(20);
/// The replicas' default renew deadline and retry period (kube-controller-manager's 10 s, 2 s).
const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
const DEFAULT_RETRY: Duration = Duration::from_secs(2);

/// Where a test's logs go (`$TMPDIR/kcm-<name>-<pid>`); kept when it fails. Shared with
/// `mixed_ha`.
pub(crate) struct Logs(PathBuf);

impl Logs {
    pub(crate) fn new(name: &str) -> Logs {
        Logs(std::env::temp_dir().join(format!("kcm-{name}-{}", std::process::id())))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Logs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the controller managers' logs are kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn timed<E: std::fmt::Display>(what: &str, step: impl FnOnce() -> Result<(), E>) {
    let started = Instant::now();
    step().unwrap_or_else(|e| panic!("{what}: {e}"));
    eprintln!("chaos: {what} took {:?}", started.elapsed());
}

/// A Lease's MicroTime field (`acquireTime`, `renewTime`).
pub(crate) fn micro_time(lease: &Value, field: &str) -> Timestamp {
    lease["spec"][field].as_str().and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{field} in {lease}"))
}

pub(crate) fn signed(d: Duration) -> jiff::SignedDuration {
    jiff::SignedDuration::try_from(d).expect("a small duration")
}

/// The length of replica `index`'s log now.
fn log_len(bed: &Bed, index: usize) -> usize {
    bed.replicas[index].as_ref().and_then(|r| std::fs::metadata(&r.log).ok()).map_or(0, |m| m.len() as usize)
}

/// Replica `index`'s log from byte `from` on (a restarted replica appends to it; a stopped
/// one's log stays). Shared with `mixed_ha`.
pub(crate) fn replica_log(bed: &Bed, index: usize, from: usize) -> String {
    let bytes = std::fs::read(bed.log_path(index)).unwrap_or_default();
    String::from_utf8_lossy(bytes.get(from..).unwrap_or_default()).into_owned()
}

#[test]
fn a_rollout_converges_through_apiserver_and_etcd_kills_and_a_compaction() {
    harness::run_on(Backend::Real, |_| {
        let logs = Logs::new("chaos-control-plane");
        let mut bed = Bed::start(Side::Ours, Path::new(BINARY), 1, &[], logs.path()).expect("a bed");
        let workload = workloads::ROLLOUT;
        timed("preparing 20 Deployments", || (workload.prepare)(&bed));
        (workload.change)(&bed).expect("a new image for all");
        for fault in [Fault::KillApiserver, Fault::KillEtcd, Fault::CompactEtcd] {
            timed(&fault.name(), || fault.inject(&mut bed));
            // An outage longer than the renew deadline ends the leader, as upstream's; its
            // supervisor starts it again.
            let restarted = bed.restart_exited().expect("exited replicas restarted");
            if !restarted.is_empty() {
                eprintln!("chaos: the leader exited during the {}; restarted", fault.name());
            }
        }
        // kube-apiserver's watches of etcd that were behind the compaction end, its watch cache
        // relists, and clients watching from older resourceVersions get 410 Gone.
        let apiserver_log = bed.plane.apiserver().log_path().to_path_buf();
        harness::eventually("kube-apiserver's etcd watches ended by the compaction", || {
            let log = std::fs::read_to_string(&apiserver_log).unwrap_or_default();
            log.contains("required revision has been compacted").then_some(())
        });
        let took = bed.converge_supervised(&workload).expect("the rollout converges");
        eprintln!("chaos: rollout converged {took:?} after the last fault");
        let found =
            bed.settled_invariants(DEFAULT_RENEW_DEADLINE + DEFAULT_RETRY, SETTLE).expect("the invariants can be read");
        assert_eq!(found.violations(), Vec::<String>::new());
        bed.stop();
    });
}

#[test]
fn two_replicas_hand_over_on_sigkill_and_sigterm_during_a_rollout() {
    harness::run_on(Backend::Real, |_| {
        let logs = Logs::new("chaos-leaders");
        let mut bed = Bed::start(Side::Ours, Path::new(BINARY), 2, TERMS, logs.path()).expect("a bed");
        let workload = workloads::ROLLOUT;
        let (first, _) = bed.wait_leader(None, Duration::from_secs(60)).expect("a leader");
        timed("preparing 20 Deployments", || (workload.prepare)(&bed));
        (workload.change)(&bed).expect("a new image for all");

        let killed = Timestamp::now();
        Fault::KillLeader.inject(&mut bed).expect("the leader killed");
        let (second, lease) = bed.wait_leader(Some(first), Duration::from_secs(60)).expect("a new leader");
        let failover = micro_time(&lease, "acquireTime").duration_since(killed);
        eprintln!("chaos: SIGKILL of the leader: replica {second} leads {failover:?} later");
        // The Lease expires at most a lease after the kill; a standby notices within two
        // jittered retry periods (one to see the last renewal, one after the expiry).
        let bound = LEASE + RETRY.mul_f64(1.0 + JITTER) * 2 + SLACK;
        assert!(failover < signed(bound), "failover {failover:?} (bound {bound:?})");

        // Restarted as systemd would, the killed replica is the standby for the next handover.
        let restarted_from = log_len(&bed, first);
        bed.restart_replica(first).expect("the killed replica restarted");
        // The new leader took the Lease a moment ago and is still starting its controllers
        // (seconds on the real server, many more on a loaded machine), and our process answers
        // a signal only once they run; a standby still starting would take a released Lease only
        // at its first attempt. Neither is the hand-over: the signal waits for both.
        bed.wait("the leader's workers and a standby following it", Duration::from_secs(120), |bed| {
            let working = replica_log(bed, second, 0).contains("workers of ");
            let following = replica_log(bed, first, restarted_from).contains("new leader elected: ");
            Ok((working && following).then_some(()))
        })
        .expect("a leader at work and a standby");
        let terminated = Timestamp::now();
        bed.replicas[second].as_mut().expect("the leader").process.signal(libc::SIGTERM);
        let (third, lease) = bed.wait_leader(Some(second), Duration::from_secs(60)).expect("the standby leads");
        assert_eq!(third, first);
        let handover = micro_time(&lease, "acquireTime").duration_since(terminated);
        // The outgoing term's last Lease write is the release, the next term's first the
        // acquisition (kube-apiserver's times for both).
        let terms = audit::lease_terms(&bed.audit_events().expect("the audit log"), kcm_envtest::envtest::chaos::LEASE);
        let [.., outgoing, incoming] = terms.as_slice() else { panic!("two terms at least: {terms:?}") };
        assert_eq!(outgoing.source_ip, replica_source(second).to_string(), "{terms:?}");
        let taken = incoming.start.duration_since(outgoing.last_renewal);
        eprintln!(
            "chaos: SIGTERM of the leader: released {:?} after the signal, replica {third} leads {taken:?} after \
             the release ({handover:?} after the signal)",
            outgoing.last_renewal.duration_since(terminated)
        );
        // A SIGTERMed leader releases the Lease, and the standby takes it at its next attempt:
        // at once (its watch), or within a jittered retry period (1.1 s). Had the leader not
        // released, or the standby not taken the release, it would wait for the term it last saw
        // to run out by its own clock, no less than the lease after that write: 4.9 s of room.
        assert!(
            taken < signed(LEASE),
            "taken over {taken:?} after the outgoing leader's last Lease write: the {LEASE:?} lease was waited out"
        );
        // From the signal: the leader's shutdown, the release (within its renew deadline), the
        // standby's attempt.
        let bound = SHUTDOWN + RENEW_DEADLINE + RETRY.mul_f64(1.0 + JITTER) + SLACK;
        assert!(handover < signed(bound), "handover {handover:?} (bound {bound:?})");
        let status = bed.replicas[second].as_mut().unwrap().process.stop(Duration::from_secs(30));
        assert!(status.is_some_and(|s| s.success()), "SIGTERM exits 0: {status:?}");
        let log = replica_log(&bed, second, 0);
        assert!(log.contains("released lease kube-system/kube-controller-manager"), "the Lease released");

        let took = bed.converge(&workload).expect("the rollout converges");
        eprintln!("chaos: rollout converged {took:?} after the second handover");
        let found = bed.settled_invariants(RENEW_DEADLINE + RETRY, SETTLE).expect("the invariants can be read");
        eprintln!("chaos: {} writes of outgoing leaders within their renew deadline", found.in_flight_writes);
        eprintln!(
            "chaos: live pods past replicas + maxSurge while a scale-down was pending: {:?}",
            found.pods_over_surge
        );
        assert_eq!(found.writers, Vec::<String>::new(), "one writer at a time");
        assert_eq!(found.surge, Vec::<String>::new(), "maxSurge");
        bed.stop();
    });
}

#[test]
fn a_leader_behind_a_stalled_apiserver_or_etcd_exits_and_its_restart_carries_on() {
    harness::run_on(Backend::Real, |_| {
        let logs = Logs::new("chaos-stall");
        let mut bed = Bed::start(Side::Ours, Path::new(BINARY), 1, TERMS, logs.path()).expect("a bed");
        let workload = workloads::NAMESPACE_DELETION;
        bed.wait_leader(None, Duration::from_secs(60)).expect("a leader");
        timed("preparing the namespace", || (workload.prepare)(&bed));
        (workload.change)(&bed).expect("the namespace deleted");

        stall_until_the_leader_exits(&mut bed, "kube-apiserver", |bed| bed.plane.apiserver());
        bed.restart_replica(0).expect("restarted as systemd would");
        let took = bed.converge(&workload).expect("the namespace is deleted");
        eprintln!("chaos: namespace deleted {took:?} after the restart");

        // etcd stalled: kube-apiserver still answers reads from its watch cache, but the
        // Lease's renewals hang until the renew deadline.
        bed.wait_leader(None, Duration::from_secs(60)).expect("the restarted replica leads");
        stall_until_the_leader_exits(&mut bed, "etcd", |bed| bed.plane.etcd());
        bed.restart_replica(0).expect("restarted as systemd would");
        bed.wait_leader(None, Duration::from_secs(60)).expect("the restarted replica leads again");

        let found = bed.settled_invariants(RENEW_DEADLINE + RETRY, SETTLE).expect("the invariants can be read");
        assert_eq!(found.writers, Vec::<String>::new(), "one writer at a time");
        bed.stop();
    });
}

/// SIGSTOPs `what` (kube-apiserver or etcd) until the one replica, unable to renew, exits with
/// "leaderelection lost" at its renew deadline; then SIGCONTs it.
fn stall_until_the_leader_exits(
    bed: &mut Bed,
    what: &str,
    process: impl Fn(&mut Bed) -> &mut kcm_envtest::envtest::process::OwnedProcess,
) {
    process(bed).signal(libc::SIGSTOP);
    let stalled = Instant::now();
    let deadline = stalled + RENEW_DEADLINE + SLACK * 3;
    let status = loop {
        if let Some(status) = bed.replicas[0].as_mut().unwrap().process.exited() {
            break status;
        }
        if Instant::now() >= deadline {
            process(bed).signal(libc::SIGCONT);
            panic!("the leader still runs {:?} into the {what} stall", stalled.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    process(bed).signal(libc::SIGCONT);
    eprintln!("chaos: the leader exited {:?} into the {what} stall ({status})", stalled.elapsed());
    assert!(!status.success(), "losing the Lease is an error exit: {status}");
    let log = std::fs::read_to_string(&bed.replicas[0].as_ref().unwrap().log).unwrap();
    assert!(log.contains("leaderelection lost"), "{}", &log[log.len().saturating_sub(3000)..]);
    assert!(stalled.elapsed() >= RENEW_DEADLINE.saturating_sub(RETRY), "gave up before its renew deadline");
}
