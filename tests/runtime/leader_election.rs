//! Lease-based leader election against both backends: acquiring, one leader among several
//! candidates, hand-over on release, take-over after a crash only once the lease expired, a
//! leader cut off from the API giving up before a standby can take over, and the healthz
//! watchdog. On the real server the API goes away by killing kube-apiserver (and starting it
//! again), and hangs by stopping it (SIGSTOP, then SIGCONT).
//!
//! Every wait is bounded by a generous deadline; timing assertions only compare times the
//! election itself guarantees an order for, so that the tests hold on a loaded machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Event;
use kcm::client::{Api, Client, ClientOptions, ListParams};
use kcm::leader::{LeaderElectionConfig, LeaderElector, LeaderEvent, identity};
use parking_lot::Mutex;

use crate::harness;

use harness::{Backend, TestServer};

/// The longest any expected change may take.
const DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);
/// Room for a loaded 2-core machine in upper bounds on hand-over times.
const SLACK: Duration = Duration::from_secs(5);
const NAMESPACE: &str = "kube-system";

/// Lease, renew deadline and retry period of one test.
#[derive(Clone, Copy)]
struct Timing {
    lease: Duration,
    renew: Duration,
    retry: Duration,
}

/// Short terms, for the tests about losing and taking over.
const FAST: Timing = Timing { lease: secs(2.0), renew: secs(1.5), retry: secs(0.3) };
/// Terms a loaded machine cannot miss, for the tests about a steady leader.
const STEADY: Timing = Timing { lease: secs(6.0), renew: secs(5.0), retry: secs(0.3) };

const fn secs(s: f64) -> Duration {
    Duration::from_millis((s * 1000.0) as u64)
}

struct Cluster {
    server: TestServer,
    client: Client,
}

fn cluster(backend: Backend) -> Cluster {
    let server = TestServer::start(backend).expect("the API server starts");
    let options = ClientOptions { qps: -1.0, burst: 1, timeout: DEADLINE };
    let client = Client::new(server.admin_config(), options).expect("a client");
    Cluster { server, client }
}

impl Cluster {
    /// The Lease `base` of this backend's run: `leader_election_master_status{name}` is the
    /// process's, shared by the runs on either backend.
    fn lease(&self, base: &str) -> String {
        match self.server.backend() {
            Backend::Sandbox => format!("{base}-sandbox"),
            Backend::Real => format!("{base}-real"),
        }
    }

    /// The API goes away: the sandbox stops listening; kube-apiserver is killed.
    fn go_down(&mut self) {
        match &mut self.server {
            TestServer::Sandbox(sandbox) => sandbox.pause(),
            TestServer::Real(plane) => {
                plane.apiserver().signal(libc::SIGKILL);
            }
        }
    }

    /// Back after [`Cluster::go_down`] (kube-apiserver is started again, with the same etcd).
    fn come_back(&mut self) {
        match &mut self.server {
            TestServer::Sandbox(sandbox) => sandbox.resume().expect("the sandbox listens again"),
            TestServer::Real(plane) => plane.restart_apiserver().expect("kube-apiserver starts again"),
        }
    }

    /// kube-apiserver's process gets `signal` (SIGSTOP: every request hangs; SIGCONT).
    fn signal_apiserver(&mut self, signal: i32) {
        let TestServer::Real(plane) = &mut self.server else { panic!("the sandbox has no process to signal") };
        plane.apiserver().signal(signal);
    }
}

/// A running elector and the events it delivered, with when they arrived.
struct Candidate {
    id: String,
    elector: LeaderElector,
    events: Arc<Mutex<Vec<(LeaderEvent, Timestamp)>>>,
}

impl Candidate {
    fn start(cluster: &Cluster, lease: &str, timing: Timing, release_on_cancel: bool) -> Candidate {
        let id = identity();
        let config = LeaderElectionConfig {
            namespace: NAMESPACE.into(),
            name: lease.into(),
            identity: id.clone(),
            lease_duration: timing.lease,
            renew_deadline: timing.renew,
            retry_period: timing.retry,
            release_on_cancel,
        };
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let elector = LeaderElector::start(cluster.client.clone(), config, move |e: &LeaderEvent| {
            sink.lock().push((e.clone(), Timestamp::now()))
        })
        .expect("the elector starts");
        Candidate { id, elector, events }
    }

    fn events(&self) -> Vec<LeaderEvent> {
        self.events.lock().iter().map(|(e, _)| e.clone()).collect()
    }

    /// When `event` was delivered, if it was.
    fn time_of(&self, event: &LeaderEvent) -> Option<Timestamp> {
        self.events.lock().iter().find(|(e, _)| e == event).map(|(_, at)| *at)
    }

    fn wait_for_event(&self, event: &LeaderEvent) -> Timestamp {
        wait_for(&format!("{event:?} delivered to {}", self.id), || self.time_of(event))
    }
}

/// Polls `probe` until it answers, failing the test after [`DEADLINE`].
fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

fn lease_spec(cluster: &Cluster, name: &str) -> LeaseSpec {
    let lease = Api::<Lease>::namespaced(&cluster.client, NAMESPACE).get(name).expect("the Lease exists");
    lease.spec.expect("the Lease has a spec")
}

fn holder(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or_default()
}

fn renew_time(spec: &LeaseSpec) -> Timestamp {
    spec.renew_time.as_ref().expect("renewTime is set").0
}

fn acquire_time(spec: &LeaseSpec) -> Timestamp {
    spec.acquire_time.as_ref().expect("acquireTime is set").0
}

/// The Lease's renewTime as stored, read without the HTTP API (works while it is down).
fn stored_renew_time(cluster: &Cluster, name: &str) -> Timestamp {
    let lease = harness::stored_object(&cluster.server, "leases", NAMESPACE, name).expect("the Lease is stored");
    lease["spec"]["renewTime"].as_str().expect("renewTime is set").parse().expect("a timestamp")
}

fn master_status(name: &str) -> Option<String> {
    let metrics = kcm::metrics::global().render();
    let series = format!("leader_election_master_status{{name=\"{name}\"}} ");
    metrics.lines().find_map(|line| line.strip_prefix(&series).map(str::to_string))
}

fn leader_elections(cluster: &Cluster, message: &str) -> Vec<Event> {
    let events = Api::<Event>::namespaced(&cluster.client, NAMESPACE).list(&ListParams::default()).expect("events");
    events.items.into_iter().filter(|e| e.message.as_deref() == Some(message)).collect()
}

on_both_backends!(a_single_candidate_acquires_renews_and_releases);
fn a_single_candidate_acquires_renews_and_releases(backend: Backend) {
    let cluster = cluster(backend);
    let name = cluster.lease("le-single");
    let a = Candidate::start(&cluster, &name, FAST, true);
    assert!(a.elector.wait_until_leader(DEADLINE), "the only candidate leads");
    assert!(a.elector.is_leader());

    let spec = lease_spec(&cluster, &name);
    assert_eq!(holder(&spec), a.id);
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(acquire_time(&spec) <= renew_time(&spec));
    assert_eq!(master_status(&name).as_deref(), Some("1"));
    assert_eq!(a.elector.check(), Ok(()));

    let message = format!("{} became leader", a.id);
    let event = wait_for("the LeaderElection event", || leader_elections(&cluster, &message).pop());
    let lease = Api::<Lease>::namespaced(&cluster.client, NAMESPACE).get(&name).expect("the Lease");
    assert_eq!(event.reason.as_deref(), Some("LeaderElection"));
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.source.and_then(|s| s.component).as_deref(), Some("kube-controller-manager"));
    assert!(event.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("{name}."))));
    let reference = event.involved_object;
    assert_eq!(reference.kind.as_deref(), Some("Lease"));
    assert_eq!(reference.api_version.as_deref(), Some("coordination.k8s.io/v1"));
    assert_eq!(reference.name.as_deref(), Some(name.as_str()));
    assert_eq!(reference.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(reference.uid, lease.metadata.uid);

    a.wait_for_event(&LeaderEvent::StartedLeading);
    assert_eq!(a.events(), [LeaderEvent::NewLeader(a.id.clone()), LeaderEvent::StartedLeading]);

    let renewed = wait_for("a renewal", || {
        let now = lease_spec(&cluster, &name);
        (renew_time(&now) > renew_time(&spec)).then_some(now)
    });
    assert_eq!(acquire_time(&renewed), acquire_time(&spec), "renewals keep the acquire time");
    assert_eq!(renewed.lease_transitions, Some(0));

    let events = a.events.clone();
    a.elector.stop();
    let released = lease_spec(&cluster, &name);
    assert_eq!(holder(&released), "", "released on a graceful stop");
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, Some(0));
    assert_eq!(master_status(&name).as_deref(), Some("0"));
    assert_eq!(events.lock().last().map(|(e, _)| e.clone()), Some(LeaderEvent::StoppedLeading));
}

/// Starts `count` candidates on one Lease and checks, over a few seconds, that exactly one of
/// them leads at every sample and that it is the one the Lease names; then stops the leader
/// and checks, at every sample until a standby leads, that no standby leads outside its term.
fn exactly_one_leads(backend: Backend, count: usize, base: &str) {
    let cluster = cluster(backend);
    let lease = cluster.lease(base);
    let lease = lease.as_str();
    let mut candidates: Vec<Candidate> = (0..count).map(|_| Candidate::start(&cluster, lease, STEADY, true)).collect();
    let first = wait_for("a leader", || candidates.iter().position(|c| c.elector.is_leader()));
    let sampling = Instant::now();
    let mut samples = 0;
    while sampling.elapsed() < Duration::from_secs(3) {
        let leaders: Vec<&str> = candidates.iter().filter(|c| c.elector.is_leader()).map(|c| c.id.as_str()).collect();
        let spec = lease_spec(&cluster, lease);
        assert_eq!(leaders, [holder(&spec)], "exactly one leader, the Lease's holder");
        samples += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(samples >= 3, "sampled {samples} times");
    let leader = candidates.remove(first);
    assert_eq!(lease_spec(&cluster, lease).lease_transitions, Some(0), "nobody took over");
    for standby in &candidates {
        standby.wait_for_event(&LeaderEvent::NewLeader(leader.id.clone()));
        assert!(!standby.events().contains(&LeaderEvent::StartedLeading));
        assert_eq!(standby.elector.check(), Ok(()), "standbys are healthy");
    }

    // The leader stops (and releases) on another thread while the standbys are sampled.
    let (old_id, old_events) = (leader.id.clone(), leader.events.clone());
    let stopping = std::thread::spawn(move || leader.elector.stop());
    let new_leader = wait_for("a standby to lead", || {
        let before = lease_spec(&cluster, lease);
        let leaders: Vec<usize> = (0..candidates.len()).filter(|i| candidates[*i].elector.is_leader()).collect();
        let after = lease_spec(&cluster, lease);
        assert!(leaders.len() <= 1, "two standbys lead at once");
        let leader = leaders.first()?;
        // A standby leads only once the Lease names it (the term may change between the reads).
        let id = candidates[*leader].id.as_str();
        assert!(holder(&before) == id || holder(&after) == id, "{id} leads outside its term: {after:?}");
        Some(*leader)
    });
    stopping.join().expect("the old leader stops");
    assert!(old_events.lock().iter().any(|(e, _)| *e == LeaderEvent::StoppedLeading), "{old_id} stopped leading");
    let spec = lease_spec(&cluster, lease);
    assert_eq!(holder(&spec), candidates[new_leader].id);
    assert_eq!(spec.lease_transitions, Some(1));

    // Standbys first: stopping the leader first would release the Lease to one of them.
    let new_leader = candidates.remove(new_leader);
    for standby in candidates {
        let events = standby.events.clone();
        standby.elector.stop();
        assert!(!events.lock().iter().any(|(e, _)| *e == LeaderEvent::StoppedLeading), "only the leader stops leading");
    }
    let events = new_leader.events.clone();
    new_leader.elector.stop();
    assert!(events.lock().iter().any(|(e, _)| *e == LeaderEvent::StoppedLeading));
}

on_both_backends!(of_two_candidates_exactly_one_leads);
fn of_two_candidates_exactly_one_leads(backend: Backend) {
    exactly_one_leads(backend, 2, "le-two");
}

on_both_backends!(of_three_candidates_exactly_one_leads);
fn of_three_candidates_exactly_one_leads(backend: Backend) {
    exactly_one_leads(backend, 3, "le-three");
}

on_both_backends!(a_graceful_stop_hands_over_to_a_standby_at_once);
fn a_graceful_stop_hands_over_to_a_standby_at_once(backend: Backend) {
    // A long lease: a standby that leads within a few retry periods took a released lease, it
    // did not wait for it to expire.
    let timing = Timing { lease: secs(10.0), renew: secs(8.0), retry: secs(0.3) };
    let cluster = cluster(backend);
    let name = cluster.lease("le-release");
    let a = Candidate::start(&cluster, &name, timing, true);
    assert!(a.elector.wait_until_leader(DEADLINE));
    let b = Candidate::start(&cluster, &name, timing, true);
    b.wait_for_event(&LeaderEvent::NewLeader(a.id.clone()));
    assert!(!b.elector.is_leader());

    let stopping = Instant::now();
    a.elector.stop();
    assert!(b.elector.wait_until_leader(DEADLINE));
    let waited = stopping.elapsed();
    assert!(waited < timing.lease, "took over after {waited:?}, before the lease would have expired");
    let spec = lease_spec(&cluster, &name);
    assert_eq!(holder(&spec), b.id);
    assert_eq!(spec.lease_transitions, Some(1), "the take-over counts as a transition");
    assert_eq!(spec.lease_duration_seconds, Some(10));
    b.wait_for_event(&LeaderEvent::StartedLeading);
    assert_eq!(
        b.events(),
        [LeaderEvent::NewLeader(a.id.clone()), LeaderEvent::NewLeader(b.id.clone()), LeaderEvent::StartedLeading]
    );
}

on_both_backends!(a_crashed_leader_is_replaced_only_after_its_lease_expired);
fn a_crashed_leader_is_replaced_only_after_its_lease_expired(backend: Backend) {
    let cluster = cluster(backend);
    let name = cluster.lease("le-crash");
    let a = Candidate::start(&cluster, &name, FAST, true);
    assert!(a.elector.wait_until_leader(DEADLINE));
    let b = Candidate::start(&cluster, &name, FAST, true);
    b.wait_for_event(&LeaderEvent::NewLeader(a.id.clone()));

    let a_id = a.id.clone();
    a.elector.abandon();
    // Follow the Lease until the standby holds it; the last record A wrote is its last renewal.
    let mut last_renewal = None;
    let taken = wait_for("the take-over", || {
        let spec = lease_spec(&cluster, &name);
        match holder(&spec) {
            h if h == a_id => {
                last_renewal = Some(renew_time(&spec));
                None
            }
            h if h == b.id => Some(spec),
            other => panic!("unexpected holder {other:?}: a crashed leader does not release"),
        }
    });
    let last_renewal = last_renewal.expect("the Lease was seen held by the crashed leader");
    let gap = acquire_time(&taken).duration_since(last_renewal);
    assert!(
        gap >= SignedDuration::try_from(FAST.lease).expect("a small duration"),
        "taken over {gap:?} after the last renewal, before the {:?} lease expired",
        FAST.lease
    );
    // The standby saw the last renewal within one jittered retry period and retried within
    // another after the lease expired (client-go: JitterFactor 1.2); plus room for a loaded machine.
    let bound = FAST.lease + FAST.retry.mul_f64(2.2) * 2 + SLACK;
    assert!(gap < SignedDuration::try_from(bound).expect("a small duration"), "taken over {gap:?} (bound {bound:?})");
    assert_eq!(taken.lease_transitions, Some(1));
    assert!(b.elector.wait_until_leader(DEADLINE));
}

on_both_backends!(a_leader_cut_off_from_the_api_stops_before_a_standby_can_take_over);
fn a_leader_cut_off_from_the_api_stops_before_a_standby_can_take_over(backend: Backend) {
    let mut cluster = cluster(backend);
    let name = cluster.lease("le-cut");
    let a = Candidate::start(&cluster, &name, FAST, true);
    assert!(a.elector.wait_until_leader(DEADLINE));
    let b = Candidate::start(&cluster, &name, FAST, true);
    b.wait_for_event(&LeaderEvent::NewLeader(a.id.clone()));

    // The API server goes away for a little longer than the lease, whatever the leader does;
    // the standby, which last saw the record before that, takes over as soon as it is back.
    cluster.go_down();
    std::thread::sleep(FAST.lease + FAST.retry);
    let last_renewal = stored_renew_time(&cluster, &name);
    cluster.come_back();

    assert_eq!(a.elector.leader_lost().recv_timeout(DEADLINE), Ok(()), "the leader noticed it lost the lease");
    assert!(!a.elector.is_leader());
    let lost_at = a.wait_for_event(&LeaderEvent::StoppedLeading);
    // The standby took over. Whether it still leads when asked is not this test's business: a
    // kube-apiserver that is still starting may answer its acquisition so late that it gives
    // up at its renew deadline, as it must.
    b.wait_for_event(&LeaderEvent::StartedLeading);
    let spec = lease_spec(&cluster, &name);
    assert_eq!(holder(&spec), b.id);
    let renew_deadline = SignedDuration::try_from(FAST.renew).expect("a small duration");
    assert!(last_renewal + renew_deadline < acquire_time(&spec), "the standby took over after the renew deadline");
    assert!(lost_at < acquire_time(&spec), "the old leader stopped before the standby started");
    assert_eq!(spec.lease_transitions, Some(1));
    assert!(a.elector.leader_lost().try_recv().is_err(), "leader_lost fires once");
}

on_both_backends!(a_leader_whose_requests_hang_gives_up_at_its_renew_deadline);
fn a_leader_whose_requests_hang_gives_up_at_its_renew_deadline(backend: Backend) {
    let mut cluster = cluster(backend);
    let name = cluster.lease("le-hang");
    let a = Candidate::start(&cluster, &name, FAST, true);
    assert!(a.elector.wait_until_leader(DEADLINE));
    let b = Candidate::start(&cluster, &name, FAST, true);
    b.wait_for_event(&LeaderEvent::NewLeader(a.id.clone()));

    // Every request now takes longer than the renew deadline; had the leader waited for its
    // renewal to be answered, it would have gone on leading.
    // On the real server they hang until kube-apiserver is continued, after the leader gave up.
    let latency = Duration::from_secs(5);
    let slowed = Instant::now();
    match &cluster.server {
        TestServer::Sandbox(sandbox) => sandbox.faults().set_latency(Some(latency)),
        TestServer::Real(_) => cluster.signal_apiserver(libc::SIGSTOP),
    }
    assert_eq!(a.elector.leader_lost().recv_timeout(DEADLINE), Ok(()));
    let waited = slowed.elapsed();
    assert!(waited < latency, "gave up after {waited:?}, without waiting for the hung renewal");
    let lost_at = a.wait_for_event(&LeaderEvent::StoppedLeading);
    match &cluster.server {
        TestServer::Sandbox(sandbox) => sandbox.faults().set_latency(None),
        TestServer::Real(_) => cluster.signal_apiserver(libc::SIGCONT),
    }

    // The standby took over (a continued kube-apiserver works through a backlog first, which
    // may cost the standby its first renew deadline: see the cut-off test).
    b.wait_for_event(&LeaderEvent::StartedLeading);
    let spec = lease_spec(&cluster, &name);
    assert_eq!(holder(&spec), b.id);
    assert!(lost_at < acquire_time(&spec), "the old leader stopped before the standby started");
}

on_both_backends!(the_health_check_fails_when_renewals_stall);
fn the_health_check_fails_when_renewals_stall(backend: Backend) {
    let mut cluster = cluster(backend);
    let name = cluster.lease("le-healthz");
    let a = Candidate::start(&cluster, &name, FAST, true);
    assert!(a.elector.wait_until_leader(DEADLINE));
    let tolerance = Duration::from_millis(500);
    let healthy = Instant::now();
    while healthy.elapsed() < Duration::from_secs(2) {
        assert_eq!(a.elector.check_with_tolerance(tolerance), Ok(()), "renewing leaders are healthy");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Renewals stall: the sandbox stops listening; kube-apiserver is stopped (requests hang).
    match &cluster.server {
        TestServer::Sandbox(sandbox) => sandbox.pause(),
        TestServer::Real(_) => cluster.signal_apiserver(libc::SIGSTOP),
    }
    assert_eq!(a.elector.leader_lost().recv_timeout(DEADLINE), Ok(()));
    let error = wait_for("the health check to fail", || a.elector.check_with_tolerance(tolerance).err()).to_string();
    assert_eq!(error, format!("failed election to renew leadership on lease {name}"));
    assert_eq!(a.elector.check(), Ok(()), "the default tolerance is 20s past the lease");
    if backend == Backend::Real {
        cluster.signal_apiserver(libc::SIGCONT);
    }
}

on_both_backends!(without_release_on_cancel_a_stop_keeps_the_lease);
fn without_release_on_cancel_a_stop_keeps_the_lease(backend: Backend) {
    let cluster = cluster(backend);
    let name = cluster.lease("le-keep");
    let a = Candidate::start(&cluster, &name, FAST, false);
    assert!(a.elector.wait_until_leader(DEADLINE));
    let (id, events) = (a.id.clone(), a.events.clone());
    a.elector.stop();
    let spec = lease_spec(&cluster, &name);
    assert_eq!(holder(&spec), id, "the lease is left to expire");
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert_eq!(events.lock().last().map(|(e, _)| e.clone()), Some(LeaderEvent::StoppedLeading));
}
