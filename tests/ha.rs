//! High availability with real processes: several `kube-controller-manager`s against one
//! sandbox. Exactly one leads (the Lease and each process's `leader_election_master_status`
//! agree), SIGKILL hands over after the lease expires, SIGTERM hands over at once (the Lease is
//! released), and a leader cut off from the API stops and exits with "leaderelection lost".
#![cfg(feature = "sandbox")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kcm::client::{Api, Client, ClientOptions};
use kcm::sandbox::server::{Sandbox, SandboxOptions};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
const LEASE: Duration = Duration::from_secs(4);
const RETRY: Duration = Duration::from_millis(500);

struct Candidate {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Candidate {
    fn start(dir: &Path, kubeconfig: &Path, ca: &Path, index: usize) -> Candidate {
        let port = free_port();
        let log = dir.join(format!("kcm-{index}.log"));
        let child = Command::new(BINARY)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(["--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s"])
            .args(["--leader-elect-retry-period=500ms", "--bind-address=127.0.0.1", "-v=2"])
            .arg(format!("--secure-port={port}"))
            .arg(format!("--client-ca-file={}", ca.display()))
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Candidate { child, port, log }
    }

    /// This process's `leader_election_master_status`, read from its secure port as an admin.
    fn reports_leading(&self, sandbox: &Sandbox) -> Option<bool> {
        let mut config = sandbox.admin_config();
        config.server = format!("https://127.0.0.1:{}", self.port);
        config.tls.ca_certs = None;
        config.tls.insecure_skip_verify = true;
        let client =
            Client::new(config, ClientOptions { timeout: Duration::from_secs(5), ..ClientOptions::default() }).ok()?;
        let text = client.get_text("/metrics").ok()?;
        let line = text.lines().find(|l| l.starts_with("leader_election_master_status{"))?;
        Some(line.ends_with(" 1"))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        assert!(Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap().success());
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn holder(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt("kube-controller-manager").ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// Which candidate (by index) a holder identity belongs to: each logs its own identity as
/// "attempting to acquire leader lease … as <identity>" (others only mention it as the new leader).
fn holder_index(candidates: &[Candidate], holder: &str) -> Option<usize> {
    candidates.iter().position(|c| c.log_text().contains(&format!(" as {holder}")))
}

fn wait<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> (T, Duration) {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return (value, started.elapsed());
        }
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn one_leader_among_three_and_fast_handovers() {
    let sandbox =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() }).unwrap();
    let dir = std::env::temp_dir().join(format!("kcm-ha-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_, kubeconfig) = sandbox.write_kubeconfigs(&dir.join("admin.conf")).unwrap();
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, sandbox.ca_pem()).unwrap();
    let admin = Client::new(sandbox.admin_config(), ClientOptions::default()).unwrap();
    let leases = Api::<Lease>::namespaced(&admin, "kube-system");

    let mut candidates: Vec<Candidate> = (0..3).map(|i| Candidate::start(&dir, &kubeconfig, &ca, i)).collect();
    let (first, _) = wait("a leader", Duration::from_secs(60), || holder(&leases));
    let leader = wait("the leader's log", Duration::from_secs(30), || holder_index(&candidates, &first)).0;

    // Exactly one process reports leading, and it is the Lease holder.
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        let reports: Vec<Option<bool>> = candidates.iter().map(|c| c.reports_leading(&sandbox)).collect();
        let leading: Vec<usize> =
            reports.iter().enumerate().filter(|(_, r)| **r == Some(true)).map(|(i, _)| i).collect();
        assert!(leading.len() <= 1, "more than one leader at once: {reports:?}");
        if let Some(i) = leading.first() {
            assert_eq!(*i, leader, "the reporting leader holds the Lease");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    wait("the leader's gauge", Duration::from_secs(30), || candidates[leader].reports_leading(&sandbox).filter(|l| *l));

    // SIGKILL: no release; a standby takes over once the lease has expired.
    candidates[leader].signal("-KILL");
    let (second, took) =
        wait("a new leader after SIGKILL", Duration::from_secs(60), || holder(&leases).filter(|h| *h != first));
    assert!(took <= LEASE + RETRY + Duration::from_secs(10), "handover after SIGKILL took {took:?}");
    let second_index = wait("the new leader's log", Duration::from_secs(30), || holder_index(&candidates, &second)).0;

    // SIGTERM: the leader releases the Lease, so the last standby leads well within a lease.
    candidates[second_index].signal("-TERM");
    let (third, took) = wait("a new leader after SIGTERM", Duration::from_secs(60), || {
        holder(&leases).filter(|h| *h != first && *h != second)
    });
    assert!(took < LEASE + Duration::from_secs(3), "handover after SIGTERM took {took:?} (no release?)");
    let status = candidates[second_index].child.wait().unwrap();
    assert!(status.success(), "SIGTERM exits 0: {status:?}");
    let third_index = wait("the third leader's log", Duration::from_secs(30), || holder_index(&candidates, &third)).0;

    // Cut off from the API, the leader gives up its work and exits with "leaderelection lost".
    sandbox.pause();
    let last = &mut candidates[third_index];
    let (status, _) =
        wait("the cut-off leader to exit", Duration::from_secs(60), || last.child.try_wait().ok().flatten());
    assert!(!status.success(), "losing the lease is an error exit");
    let log = std::fs::read_to_string(&last.log).unwrap();
    assert!(log.contains("leaderelection lost"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}
