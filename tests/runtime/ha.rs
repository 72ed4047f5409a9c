//! High availability with real processes: two or three `kube-controller-manager`s against one
//! API server (of either backend), each reaching it through its own TCP proxy so that one can
//! be cut off alone.
//!
//! A sampler follows every test: at each sample at most one process's
//! `leader_election_master_status` is 1, and it is the Lease holder's. Standbys watch the
//! Lease, so SIGKILL hands over once the lease expired and within little more than it (not a
//! lease plus retry periods, as client-go's polling would); SIGTERM releases the Lease, so a
//! standby leads within seconds although the lease is 30 s and the retry period 10 s; a leader
//! cut off from the API exits with "leaderelection lost" before the standby acquires the Lease.
//!
//! Bounds are what client-go guarantees plus [`SLACK`] for a loaded 2-core machine; the Lease's
//! own timestamps are compared, so how fast the test notices a change does not matter.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kcm::client::{Api, Client, ClientOptions};
use kcm_envtest::envtest::chaos::{Proxy, replica_source};
use parking_lot::Mutex;

use crate::harness;

use harness::{Backend, TestServer};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
const LEASE_NAMESPACE: &str = "kube-system";
const LEASE_NAME: &str = "kube-controller-manager";
/// Room for a loaded 2-core machine (process scheduling, TLS handshakes, slow requests).
const SLACK: Duration = Duration::from_secs(5);
/// The longest any expected change may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(60);
/// How often the test polls the Lease and the processes' exits.
const POLL: Duration = Duration::from_millis(10);

/// The `--leader-elect-*` durations every process of a test runs with.
#[derive(Clone, Copy)]
struct Terms {
    lease: Duration,
    renew: Duration,
    retry: Duration,
}

/// Short terms, for the cases where a standby must wait for the lease to expire. The renew
/// deadline is half the lease: a cut-off leader gives up 3 s before a standby may take over.
const SHORT: Terms = Terms { lease: secs(6), renew: secs(3), retry: Duration::from_millis(500) };
/// A lease far longer than a release handover may take, so that only the release explains it,
/// and a retry period longer than it too, so that only the standby's watch explains it.
const LONG: Terms = Terms { lease: secs(30), renew: secs(20), retry: secs(10) };
/// A standby leads this soon after the SIGTERM that makes the leader release the Lease: the old
/// leader's shutdown, the watch event and one attempt take well under 3 s, plus [`SLACK`];
/// below [`LONG`]'s retry period, far below its lease.
const RELEASE_HANDOVER: Duration = Duration::from_secs(3 + SLACK.as_secs());
/// kubeadm's lease and renew deadline with the longest retry period they allow (the renew
/// deadline must exceed 1.2 retry periods): polling standbys would take over up to two
/// jittered retry periods (35 s) after the lease ran out, watching ones at once.
const WATCHED: Terms = Terms { lease: secs(15), renew: secs(10), retry: secs(8) };
/// How late past the lease duration a watching standby may take over on a loaded 2-core
/// machine: the last renewal's request, its watch event and the standby's wake-up. Timely
/// standbys take ~0.1 s; a polling one would exceed this about 6 times in 7 ([`WATCHED`]'s
/// jittered retry is 8-17.6 s).
const EXPIRY_SLACK: Duration = Duration::from_millis(2500);

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

impl Terms {
    fn flags(&self) -> [String; 4] {
        [
            "--leader-elect=true".into(),
            format!("--leader-elect-lease-duration={}ms", self.lease.as_millis()),
            format!("--leader-elect-renew-deadline={}ms", self.renew.as_millis()),
            format!("--leader-elect-retry-period={}ms", self.retry.as_millis()),
        ]
    }
}

/// An API server and what the processes need to reach it.
struct Bed {
    server: TestServer,
    dir: PathBuf,
    /// The controller manager's kubeconfig, aimed at the API server.
    kubeconfig: String,
    ca: PathBuf,
    /// The API server's address, which the proxies forward to.
    upstream: SocketAddr,
}

impl Bed {
    fn start(name: &str, backend: Backend) -> Bed {
        let server = TestServer::start(backend).unwrap();
        let dir = std::env::temp_dir().join(format!("kcm-ha-{}-{name}-{backend:?}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (_, kubeconfig) = server.write_kubeconfigs(&dir.join("admin.conf")).unwrap();
        let kubeconfig = std::fs::read_to_string(kubeconfig).unwrap();
        assert!(kubeconfig.contains(&server.url()), "the kubeconfig names the API server's URL");
        let ca = dir.join("ca.crt");
        std::fs::write(&ca, server.ca_pem()).unwrap();
        let url = server.url();
        let upstream = url.strip_prefix("https://").and_then(|a| a.parse().ok()).expect("https://<ip>:<port>");
        Bed { server, dir, kubeconfig, ca, upstream }
    }

    fn start_candidates(&self, count: usize, terms: Terms) -> Vec<Candidate> {
        let mut candidates: Vec<Candidate> = (0..count).map(|i| Candidate::start(self, i, terms)).collect();
        for candidate in &mut candidates {
            candidate.identity = wait("the process's identity in its log", || candidate.logged_identity());
        }
        candidates
    }

    /// The Lease as stored (beside the API, so polling it is cheap and never times out).
    fn lease(&self) -> Option<LeaseSpec> {
        let lease = harness::stored_object(&self.server, "leases", LEASE_NAMESPACE, LEASE_NAME)?;
        serde_json::from_value::<Lease>(lease).expect("a Lease").spec
    }

    fn holder(&self) -> String {
        self.lease().and_then(|s| s.holder_identity).unwrap_or_default()
    }

    /// Which candidate holds the Lease, once one does.
    fn wait_for_leader(&self, candidates: &[Candidate]) -> usize {
        wait("a leader", || candidates.iter().position(|c| c.identity == self.holder()))
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the processes' logs are kept in {}", self.dir.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One controller-manager process.
struct Candidate {
    child: Child,
    /// Its secure port, serving `/metrics`.
    port: u16,
    log: PathBuf,
    /// Its own way to the API server.
    proxy: Proxy,
    /// Its name in the Lease.
    identity: String,
}

impl Candidate {
    fn start(bed: &Bed, index: usize, terms: Terms) -> Candidate {
        let proxy = Proxy::start(bed.upstream, replica_source(index)).unwrap();
        let kubeconfig = bed.dir.join(format!("kcm-{index}.conf"));
        let url = proxy.url();
        std::fs::write(&kubeconfig, bed.kubeconfig.replace(&bed.server.url(), &url)).unwrap();
        let port = free_port();
        let log = bed.dir.join(format!("kcm-{index}.log"));
        let mut kubeadm_flags = Vec::new();
        if bed.server.backend() == Backend::Real {
            // kubeadm's: with RBAC on, each controller acts as its own ServiceAccount.
            kubeadm_flags.push("--use-service-account-credentials=true".to_string());
            kubeadm_flags.push(format!("--service-account-private-key-file={}", bed.dir.join("sa.key").display()));
            kubeadm_flags.push(format!("--root-ca-file={}", bed.ca.display()));
        }
        let child = Command::new(BINARY)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(&kubeadm_flags)
            .args(terms.flags())
            .args(["--bind-address=127.0.0.1", "-v=2"])
            .arg(format!("--secure-port={port}"))
            .arg(format!("--client-ca-file={}", bed.ca.display()))
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Candidate { child, port, log, proxy, identity: String::new() }
    }

    /// The identity it logs as "attempting to acquire leader lease <ns>/<name> as <identity>".
    fn logged_identity(&self) -> Option<String> {
        let marker = format!("attempting to acquire leader lease {LEASE_NAMESPACE}/{LEASE_NAME} as ");
        let log = self.log_text();
        let line = log.lines().find_map(|l| l.split_once(&marker).map(|(_, rest)| rest.trim().to_string()))?;
        (!line.is_empty()).then_some(line)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        assert!(Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap().success());
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let child = &mut self.child;
        wait("the process to exit", || child.try_wait().unwrap())
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Polls `check` until it answers, failing the test after [`DEADLINE`].
fn wait<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

fn acquire_time(spec: &LeaseSpec) -> Timestamp {
    spec.acquire_time.as_ref().expect("acquireTime is set").0
}

fn renew_time(spec: &LeaseSpec) -> Timestamp {
    spec.renew_time.as_ref().expect("renewTime is set").0
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).expect("a small duration")
}

/// The Lease's term: who holds it and how many times it changed hands.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    holder: String,
    transitions: i32,
}

impl Term {
    fn of(spec: Option<LeaseSpec>) -> Term {
        let spec = spec.unwrap_or_default();
        Term { holder: spec.holder_identity.unwrap_or_default(), transitions: spec.lease_transitions.unwrap_or(0) }
    }
}

/// Checks one sample: the Lease's term read `before` the gauges, the identities whose gauge
/// read 1, and the term read `after`. Within one term at most one process leads, the holder.
/// A sample that straddles a handover (the term changed) may see the old and the new leader,
/// whose gauges were read at different instants, but nobody else.
fn check_sample(before: &Term, leading: &[String], after: &Term) -> Result<(), String> {
    if before == after {
        if leading.len() > 1 {
            return Err(format!("{leading:?} all report leading during one term of {}", before.holder));
        }
        if let Some(leader) = leading.first().filter(|l| **l != before.holder) {
            return Err(format!("{leader} reports leading while the Lease names {:?}", before.holder));
        }
        return Ok(());
    }
    match leading.iter().find(|l| **l != before.holder && **l != after.holder) {
        Some(leader) => Err(format!("{leader} reports leading while the Lease went {before:?} -> {after:?}")),
        None => Ok(()),
    }
}

/// Samples the Lease and every process's `leader_election_master_status` until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Samples>>,
    thread: JoinHandle<()>,
}

#[derive(Default, Debug)]
struct Samples {
    count: usize,
    /// Identities seen leading, in order (each once per leadership).
    leaders: Vec<String>,
    violations: Vec<String>,
}

impl Sampler {
    fn start(bed: &Bed, candidates: &[Candidate]) -> Sampler {
        let probes: Vec<(String, Client)> =
            candidates.iter().map(|c| (c.identity.clone(), metrics_client(bed, c.port))).collect();
        let admin = Client::new(bed.server.admin_config(), ClientOptions::default()).unwrap();
        let leases = Api::<Lease>::namespaced(&admin, LEASE_NAMESPACE);
        let lease = move || Term::of(leases.get_opt(LEASE_NAME).expect("the Lease can be read").and_then(|l| l.spec));
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Samples::default()));
        let (stopped, sink) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let before = lease();
                let leading: Vec<String> = probes
                    .iter()
                    .filter(|(_, client)| reports_leading(client) == Some(true))
                    .map(|(identity, _)| identity.clone())
                    .collect();
                let after = lease();
                let mut samples = sink.lock();
                if let Err(violation) = check_sample(&before, &leading, &after) {
                    samples.violations.push(violation);
                }
                for leader in leading {
                    if samples.leaders.last() != Some(&leader) {
                        samples.leaders.push(leader);
                    }
                }
                samples.count += 1;
                drop(samples);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Sampler { stop, samples, thread }
    }

    /// Waits until the sampler saw `identity`'s gauge at 1, then for a few more samples.
    fn wait_until_leading(&self, identity: &str) {
        let seen = wait("the leader's gauge", || {
            let samples = self.samples.lock();
            (samples.leaders.last().map(String::as_str) == Some(identity)).then_some(samples.count)
        });
        wait("more samples", || (self.samples.lock().count >= seen + 3).then_some(()));
    }

    /// Stops sampling; fails the test on any violation.
    fn finish(self) -> Samples {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the sampler");
        let samples = std::mem::take(&mut *self.samples.lock());
        assert!(samples.violations.is_empty(), "more than one leader at once: {:?}", samples.violations);
        samples
    }
}

/// A client for a process's secure port, as an admin (its `--client-ca-file` is the API server's).
fn metrics_client(bed: &Bed, port: u16) -> Client {
    let mut config = bed.server.admin_config();
    config.server = format!("https://127.0.0.1:{port}");
    config.tls.ca_certs = None;
    config.tls.insecure_skip_verify = true;
    Client::new(config, ClientOptions { timeout: Duration::from_secs(5), ..ClientOptions::default() }).unwrap()
}

/// The process's `leader_election_master_status`, if it answers.
fn reports_leading(client: &Client) -> Option<bool> {
    let text = client.get_text("/metrics").ok()?;
    let series = format!("leader_election_master_status{{name=\"{LEASE_NAME}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&series)).map(|value| value == "1")
}

/// Follows the Lease while `old` holds it, until another holds it: the old holder's last
/// record and the new one. Polling every 10 ms cannot miss the old holder's last renewal: it
/// stays unchanged for at least the lease duration.
fn follow_handover(bed: &Bed, old: &str) -> (LeaseSpec, LeaseSpec) {
    let mut last = None;
    let new = wait("another holder", || {
        let spec = bed.lease()?;
        if spec.holder_identity.as_deref() == Some(old) {
            last = Some(spec);
            return None;
        }
        spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty()).then_some(spec)
    });
    (last.expect("the Lease was seen held by the old leader"), new)
}

#[test]
fn the_sample_check_accepts_handovers_and_flags_two_leaders() {
    let term = |holder: &str, transitions| Term { holder: holder.into(), transitions };
    let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(check_sample(&term("a", 0), &ids(&["a"]), &term("a", 0)), Ok(()));
    assert_eq!(check_sample(&term("a", 0), &ids(&[]), &term("a", 0)), Ok(()), "between losing and exiting");
    assert_eq!(check_sample(&term("a", 0), &ids(&["a", "b"]), &term("b", 1)), Ok(()), "a handover mid-sample");
    assert!(check_sample(&term("a", 0), &ids(&["a", "b"]), &term("a", 0)).is_err());
    assert!(check_sample(&term("b", 1), &ids(&["a"]), &term("b", 1)).is_err(), "a leader past its term");
    assert!(check_sample(&term("", 1), &ids(&["a"]), &term("", 1)).is_err(), "leading a released Lease");
    assert!(check_sample(&term("a", 0), &ids(&["c"]), &term("b", 1)).is_err());
}

on_both_backends!(of_three_processes_one_leads_and_sigkill_hands_over_at_the_lease_expiry);
/// Three processes: one leads at every sample; a SIGKILL'd leader keeps the Lease until it
/// expires, then a standby takes it within [`EXPIRY_SLACK`] of the expiry: its watch saw the
/// last renewal as it happened and woke it when the term ran out by its clock. Polling alone
/// (client-go) could take two jittered retry periods more: one to see the last renewal, one to
/// retry after expiry.
fn of_three_processes_one_leads_and_sigkill_hands_over_at_the_lease_expiry(backend: Backend) {
    let bed = Bed::start("kill", backend);
    let mut candidates = bed.start_candidates(3, WATCHED);
    let sampler = Sampler::start(&bed, &candidates);
    let first = bed.wait_for_leader(&candidates);
    sampler.wait_until_leading(&candidates[first].identity);

    candidates[first].signal("-KILL");
    let status = candidates[first].wait_exit();
    assert!(!status.success(), "killed: {status:?}");
    let (last, taken) = follow_handover(&bed, &candidates[first].identity);
    let gap = acquire_time(&taken).duration_since(renew_time(&last));
    eprintln!("SIGKILL: taken over {gap:?} after the last renewal");
    assert!(gap >= signed(WATCHED.lease), "taken over {gap:?} after the last renewal, before the lease expired");
    let bound = WATCHED.lease + EXPIRY_SLACK;
    assert!(gap < signed(bound), "taken over {gap:?} after the last renewal (bound {bound:?})");
    assert_eq!(taken.lease_transitions, Some(1));
    let second = candidates.iter().position(|c| Some(&c.identity) == taken.holder_identity.as_ref()).unwrap();
    let ran_out =
        format!("the term of {} on leader lease {LEASE_NAMESPACE}/{LEASE_NAME} ran out", candidates[first].identity);
    assert!(candidates[second].log_text().contains(&ran_out), "attempted at the expiry");
    sampler.wait_until_leading(&candidates[second].identity);

    let samples = sampler.finish();
    let (first_id, second_id) = (&candidates[first].identity, &candidates[second].identity);
    assert_eq!(samples.leaders, [first_id.clone(), second_id.clone()], "{samples:?}");
    assert!(samples.count >= 10, "{samples:?}");
}

on_both_backends!(of_two_processes_one_leads_and_sigterm_hands_over_at_once);
/// Two processes, a 30 s lease, a 10 s retry period: SIGTERM releases the Lease (client-go's
/// `ReleaseOnCancel`), the standby's watch sees it, and the standby leads within
/// [`RELEASE_HANDOVER`]; waiting for the lease would take 30 s, for its next periodic attempt up
/// to 22 s. It says in its log that the watch woke it. The last process, SIGTERM'd, leaves the
/// Lease released: no holder, a one-second term.
fn of_two_processes_one_leads_and_sigterm_hands_over_at_once(backend: Backend) {
    let bed = Bed::start("term", backend);
    let mut candidates = bed.start_candidates(2, LONG);
    let sampler = Sampler::start(&bed, &candidates);
    let first = bed.wait_for_leader(&candidates);
    let second = 1 - first;
    sampler.wait_until_leading(&candidates[first].identity);
    let leader = candidates[first].identity.clone();
    wait("the standby to see the leader", || {
        candidates[second].log_text().contains(&format!("new leader elected: {leader}")).then_some(())
    });

    // The process notices signals once its controllers started (which takes seconds on the
    // real server); the handover is measured from then on.
    wait("the leader's controllers to run", || candidates[first].log_text().contains("workers of ").then_some(()));

    let terminated = Timestamp::now();
    candidates[first].signal("-TERM");
    let (_, taken) = follow_handover(&bed, &leader);
    let took = acquire_time(&taken).duration_since(terminated);
    eprintln!(
        "SIGTERM: taken over {took:?} after the signal (sent at {terminated}, acquired at {})",
        acquire_time(&taken)
    );
    assert!(took < signed(RELEASE_HANDOVER), "handover after SIGTERM took {took:?}; the lease is {:?}", LONG.lease);
    assert_eq!(taken.holder_identity.as_ref(), Some(&candidates[second].identity));
    let woken = format!("leader lease {LEASE_NAMESPACE}/{LEASE_NAME} is free, attempting to acquire it now");
    assert!(candidates[second].log_text().contains(&woken), "the watch woke the standby");
    assert_eq!(taken.lease_transitions, Some(1));
    let status = candidates[first].wait_exit();
    assert!(status.success(), "SIGTERM exits 0: {status:?}");
    assert!(candidates[first].log_text().contains("released lease kube-system/kube-controller-manager"));
    sampler.wait_until_leading(&candidates[second].identity);

    let terminated = Timestamp::now();
    candidates[second].signal("-TERM");
    let status = candidates[second].wait_exit();
    assert!(status.success(), "SIGTERM exits 0: {status:?}");
    let released = bed.lease().expect("the Lease");
    assert_eq!(released.holder_identity.as_deref(), Some(""), "released: {released:?}");
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, Some(1), "a release is no transition");
    assert!(renew_time(&released) >= terminated, "released after the signal: {released:?}");

    let samples = sampler.finish();
    assert_eq!(samples.leaders, [leader, candidates[second].identity.clone()], "{samples:?}");
}

on_both_backends!(of_two_processes_a_cut_off_leader_exits_before_the_standby_takes_over);
/// Two processes; the leader's network to the API is cut. It fails to renew, gives up at its
/// renew deadline and exits with "leaderelection lost" before the standby, which still reaches
/// the API, acquires the expired Lease: the old leader's work ended before the new one's began.
fn of_two_processes_a_cut_off_leader_exits_before_the_standby_takes_over(backend: Backend) {
    let bed = Bed::start("cut", backend);
    let mut candidates = bed.start_candidates(2, SHORT);
    let sampler = Sampler::start(&bed, &candidates);
    let first = bed.wait_for_leader(&candidates);
    let second = 1 - first;
    sampler.wait_until_leading(&candidates[first].identity);
    let leader = candidates[first].identity.clone();

    candidates[first].proxy.cut();
    // Notice the old leader's exit and the new holder in one loop, so that their order shows.
    let mut exited = None;
    let mut last = None;
    let taken = wait("the standby to take over", || {
        if exited.is_none() {
            exited = candidates[first].child.try_wait().unwrap().map(|status| (status, Timestamp::now()));
        }
        let spec = bed.lease()?;
        if spec.holder_identity.as_deref() == Some(leader.as_str()) {
            last = Some(spec);
            return None;
        }
        Some(spec)
    });
    // Checked once more in case it exited between the two reads: `exited_at` is then still no
    // earlier than the exit, which is all the order check below needs.
    if exited.is_none() {
        exited = candidates[first].child.try_wait().unwrap().map(|status| (status, Timestamp::now()));
    }
    let (status, exited_at) = exited.expect("the cut-off leader exited before the standby took over");
    assert!(!status.success(), "losing the lease is an error exit: {status:?}");
    assert!(candidates[first].log_text().contains("leaderelection lost"));
    assert_eq!(taken.holder_identity.as_ref(), Some(&candidates[second].identity));
    eprintln!("cut off: exit noticed {:?} before the new term", acquire_time(&taken).duration_since(exited_at));
    // The exit was noticed before the Lease changed hands; the new term starts later still.
    assert!(exited_at < acquire_time(&taken), "exited at {exited_at}, after the new term started: {taken:?}");
    let last = last.expect("the Lease was seen held by the cut-off leader");
    let gap = acquire_time(&taken).duration_since(renew_time(&last));
    assert!(gap >= signed(SHORT.lease), "taken over {gap:?} after the last renewal, before the lease expired");
    sampler.wait_until_leading(&candidates[second].identity);

    let samples = sampler.finish();
    assert_eq!(samples.leaders, [leader, candidates[second].identity.clone()], "{samples:?}");
}
