//! Adoption on a live HA control plane (issue 38): three replicas share the
//! `kube-controller-manager` Lease and are replaced one at a time, as an administrator replaces
//! them node by node, from upstream's binary to ours and back, while a workload churns; and ours
//! upgraded while leading (its .deb's binary replaced under it; its container, in containerd,
//! replaced by a new one of its image).
//!
//! Real server only, on the chaos bed (`kcm_envtest::envtest::chaos`): every replica has its own
//! source address, so the audit log tells the Lease's holders and every write's author apart
//! across both binaries. The replicas run with kubeadm's leader-election terms (15 s lease,
//! 10 s renew deadline, 2 s retry), so the hand-over times printed are the ones a kubeadm cluster
//! sees. What must hold, whichever replica wins each election (that is chance, and not asserted):
//! - each binary honours the other's Lease: a standby takes a Lease left to expire (upstream's
//!   on SIGTERM: its release is behind an alpha gate) no earlier than a lease after its last
//!   renewal, and takes a released one (ours) at its next attempt;
//! - one writer at a time, no pods past replicas + maxSurge, no duplicate endpoints, no Event
//!   lost beyond what a hand-over allows (the chaos suite's invariants, [`Bed::invariants`]);
//! - no controller acts twice on one object: the Job's pods and the StatefulSet's ordinals are
//!   created exactly once each across all hand-overs;
//! - no work lost: every change made just before a swap converges after it.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use kcm_envtest::envtest::Assets;
use kcm_envtest::envtest::chaos::{Bed, LEASE as LEASE_NAME, Launch, Workload, audit, replica_source, workloads};
use kcm_envtest::envtest::process::OwnedProcess;
use kcm_envtest::envtest::sidebyside::Side;

use crate::chaos::{Logs, micro_time, replica_log, signed};
use crate::harness::{self, Backend};

const OURS: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
/// kube-controller-manager's (and kubeadm's) leader-election terms, the replicas' defaults.
const LEASE: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);
/// client-go's `JitterFactor`: a candidate retries every retry period × [1, 2.2).
const JITTER: f64 = 1.2;
/// Room for a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(10);
/// How long a SIGTERMed replica may take to exit: ours drains its syncs and Events for up to
/// 15 s before it releases the Lease; upstream's exits at once.
const SHUTDOWN: Duration = Duration::from_secs(30);
/// How long the last Events may take to land after convergence.
const SETTLE: Duration = Duration::from_secs(20);
/// The resolution of the clocks compared (kube-apiserver's audit times, the standbys' own).
const CLOCKS: Duration = Duration::from_secs(1);

/// One replacement of a replica, as the test saw it.
struct Swap {
    /// The replica stopped and the one started in its place.
    stopped: usize,
    started: usize,
    from: Side,
    to: Side,
    /// Set when the stopped replica led: the replica that led next, whose binary, how long
    /// after the SIGTERM it took the Lease, and how long after the outgoing term's last Lease
    /// write (a renewal, or ours' release).
    handover: Option<(usize, Side, SignedDuration, SignedDuration)>,
    /// How long the change made just before the swap took to converge after it.
    converged: Duration,
}

/// The current leader (waiting for one).
fn leader(bed: &Bed) -> usize {
    bed.wait_leader(None, Duration::from_secs(120)).expect("a leader").0
}

/// Waits until replica `index` runs as a candidate (it tried the Lease at least once), so that
/// the next swap starts from three candidates, as a rolling replacement does.
fn wait_candidate(bed: &Bed, index: usize) {
    bed.wait("the new replica to try the Lease", Duration::from_secs(120), |bed| {
        // Ours logs client-go's v1.33 words, upstream's v1.36.2 "Attempting to acquire leader lease...".
        Ok(replica_log(bed, index, 0).to_ascii_lowercase().contains("attempting to acquire leader lease").then_some(()))
    })
    .unwrap_or_else(|e| panic!("replica {index}: {e}"));
}

/// Stops replica `old` (SIGTERM, as its supervisor does), starts `launch` in its place from a
/// new address, and, when `old` led, waits for the next leader and checks that it
/// honoured the outgoing term: a Lease left to expire is taken no earlier than a lease after its
/// last renewal; a released one well before that.
fn swap(bed: &mut Bed, old: usize, launch: Launch) -> Swap {
    let to = launch.side;
    let from = bed.side(old).expect("a replica");
    let led = leader(bed) == old;
    let terminated = Timestamp::now();
    let status = bed.stop_replica(old, SHUTDOWN).unwrap_or_else(|| panic!("replica {old} was running"));
    // Ours exits 0 once it has drained and released; upstream's v1.36.2 installs no handler
    // for SIGTERM and dies of it.
    let expected = match from {
        Side::Ours => status.success(),
        Side::Upstream => status.signal() == Some(libc::SIGTERM),
    };
    assert!(expected, "replica {old} ({}) on SIGTERM: {status:?}", from.name());
    let started = bed.add_replica(launch).expect("the new replica starts");
    let handover = led.then(|| {
        let (next, lease) = bed.wait_leader(Some(old), LEASE * 4).expect("a new leader");
        let after_signal = micro_time(&lease, "acquireTime").duration_since(terminated);
        let events = bed.audit_events().expect("the audit log");
        let terms = audit::lease_terms(&events, LEASE_NAME);
        let [.., outgoing, incoming] = terms.as_slice() else { panic!("two terms at least: {terms:?}") };
        assert_eq!(outgoing.source_ip, replica_source(old).to_string(), "{terms:?}");
        assert_eq!(incoming.source_ip, replica_source(next).to_string(), "{terms:?}");
        let after_last_write = incoming.start.duration_since(outgoing.last_renewal);
        let released = replica_log(bed, old, 0).contains("released lease kube-system/kube-controller-manager");
        assert_eq!(released, from == Side::Ours, "only ours releases the Lease on SIGTERM (replica {old})");
        if released {
            // Taken at the standbys' next attempt (a jittered retry period), not a lease later.
            let bound = RETRY.mul_f64(1.0 + JITTER) + SLACK;
            assert!(after_last_write < signed(bound), "a released Lease taken {after_last_write:?} after the release");
        } else {
            // Every standby saw the last renewal and waits a lease from then by its own clock.
            assert!(
                after_last_write + signed(CLOCKS) >= signed(LEASE),
                "replica {next} took the Lease {after_last_write:?} after the last renewal of replica {old}: \
                 before the {LEASE:?} lease ran out"
            );
        }
        (next, bed.side(next).expect("a replica"), after_signal, after_last_write)
    });
    wait_candidate(bed, started);
    Swap { stopped: old, started, from, to, handover, converged: Duration::ZERO }
}

/// The replica to replace next on the way to `to`: the leader if it is not `to`'s yet (so that
/// every swap hands the Lease over), else the first running one that is not.
fn next_to_replace(bed: &Bed, to: Side) -> usize {
    let leader = leader(bed);
    if bed.side(leader) != Some(to) {
        return leader;
    }
    let running = (0..bed.replicas.len()).filter(|&i| bed.replicas[i].is_some());
    running.into_iter().find(|&i| bed.side(i) != Some(to)).expect("a replica left to replace")
}

fn seconds(d: SignedDuration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn print_swaps(swaps: &[&Swap]) {
    eprintln!(
        "mixed HA: swap | replaced | by | led | next leader | after SIGTERM | after last Lease write | converged"
    );
    for (n, swap) in swaps.iter().enumerate() {
        let (led, next, signal, write) = match &swap.handover {
            Some((next, side, signal, write)) => {
                ("yes", format!("{next} ({})", side.name()), seconds(*signal), seconds(*write))
            }
            None => ("no", "-".into(), "-".into(), "-".into()),
        };
        eprintln!(
            "mixed HA: {} | {} ({}) | {} ({}) | {led} | {next} | {signal} | {write} | {:.1} s",
            n + 1,
            swap.stopped,
            swap.from.name(),
            swap.started,
            swap.to.name(),
            swap.converged.as_secs_f64()
        );
    }
}

/// The invariants over the whole run, and the controllers that must not have acted twice.
fn check_invariants(bed: &Bed) {
    let found = bed.settled_invariants(RENEW_DEADLINE + RETRY, SETTLE).expect("the invariants can be read");
    eprintln!("mixed HA: {} writes of outgoing leaders within their renew deadline", found.in_flight_writes);
    eprintln!(
        "mixed HA: live pods past replicas + maxSurge while a scale-down was pending: {:?}",
        found.pods_over_surge
    );
    assert_eq!(found.violations(), Vec::<String>::new());
    let events = bed.audit_events().expect("the audit log");
    let job_pods = audit::pods_created_for(&events, "Job", "chaos", "batch");
    assert_eq!(job_pods.len(), 6, "the Job of 6 completions created {job_pods:?}");
    let mut ordinals = audit::pods_created_for(&events, "StatefulSet", "chaos", "db");
    ordinals.sort();
    assert_eq!(ordinals, ["db-0", "db-1", "db-2", "db-3"], "each ordinal created once");
}

#[test]
fn three_replicas_swapped_from_upstreams_to_ours_and_back_while_work_goes_on() {
    harness::run_on(Backend::Real, |_| {
        let upstream = Assets::locate().expect("the real control plane's binaries").kube_controller_manager;
        let ours = PathBuf::from(OURS);
        let logs = Logs::new("mixed-ha-swap");
        let mut bed =
            Bed::start(Side::Upstream, &upstream, 3, workloads::NODE_FAILURE.flags, logs.path()).expect("a bed");
        leader(&bed);
        let prepared = Instant::now();
        for workload in
            [&workloads::ROLLOUT, &workloads::NAMESPACE_DELETION, &workloads::NODE_FAILURE, &workloads::STATEFUL_SET]
        {
            (workload.prepare)(&bed).unwrap_or_else(|e| panic!("preparing the {}: {e}", workload.name));
        }
        eprintln!("mixed HA: workloads prepared in {:?} on 3 upstream replicas", prepared.elapsed());
        // Each swap comes right after a change, so that the work spans the hand-over. The node
        // failure comes last: a StatefulSet waits for its pods on the failed node (NotReady)
        // before it creates more, as upstream's does.
        let plan: [(&Workload, Side, &Path); 6] = [
            (&workloads::ROLLOUT, Side::Ours, &ours),
            (&workloads::NAMESPACE_DELETION, Side::Ours, &ours),
            (&workloads::STATEFUL_SET, Side::Ours, &ours),
            (&workloads::ROLLOUT_BACK, Side::Upstream, &upstream),
            (&workloads::JOB, Side::Upstream, &upstream),
            (&workloads::NODE_FAILURE, Side::Upstream, &upstream),
        ];
        let mut swaps = Vec::new();
        for (workload, to, binary) in plan {
            (workload.change)(&bed).unwrap_or_else(|e| panic!("the {}: {e}", workload.name));
            let old = next_to_replace(&bed, to);
            let mut swap = swap(&mut bed, old, Launch::binary(to, binary));
            let started = Instant::now();
            bed.converge_supervised(workload).unwrap_or_else(|e| panic!("after swap {}: {e}", swaps.len() + 1));
            swap.converged = started.elapsed();
            swaps.push(swap);
            if swaps.len() == 3 {
                let sides: Vec<_> = (0..bed.replicas.len()).filter(|&i| bed.replicas[i].is_some()).collect();
                assert!(sides.iter().all(|&i| bed.side(i) == Some(Side::Ours)), "3 × ours now: {sides:?}");
            }
        }
        print_swaps(&swaps.iter().collect::<Vec<_>>());
        assert!(swaps.iter().any(|s| s.handover.is_some()), "at least one swap handed the Lease over");
        check_invariants(&bed);
        bed.stop();
    });
}

/// Unpacks `deb`'s files into `root` as dpkg does: each file written beside its place and
/// renamed over it, so a running binary keeps its old inode.
fn install_deb(deb: &Path, root: &Path) {
    let staged = root.with_extension("unpacking");
    let _ = std::fs::remove_dir_all(&staged);
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&staged));
    let binary = "usr/bin/kube-controller-manager";
    std::fs::create_dir_all(root.join("usr/bin")).expect("the install root");
    std::fs::rename(staged.join(binary), root.join(binary)).expect("the binary renamed into place");
    let _ = std::fs::remove_dir_all(&staged);
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A containerd of the test's own (its own root, state and socket; no CRI plugin; plain-copy
/// snapshots, which work where overlayfs does not), with one image imported: what the kubelet
/// uses to run a static Pod, without the kubelet. Its containers are killed when it goes.
struct Containerd {
    dir: PathBuf,
    process: OwnedProcess,
    image: String,
}

impl Containerd {
    const NAMESPACE: &str = "kcm-mixed-ha";

    fn start(dir: &Path, archive: &Path) -> Containerd {
        std::fs::create_dir_all(dir).expect("containerd's folder");
        let path = |name: &str| dir.join(name).display().to_string();
        let config = format!(
            "version = 2\nroot = \"{}\"\nstate = \"{}\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\n  address = \"{}\"\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{}\"\n",
            path("root"),
            path("state"),
            path("containerd.sock"),
            path("opt")
        );
        std::fs::write(dir.join("config.toml"), config).expect("containerd's configuration");
        let mut command = Command::new("containerd");
        command.arg("--config").arg(dir.join("config.toml"));
        let process =
            OwnedProcess::spawn("containerd", command, &dir.join("containerd.log")).expect("containerd starts");
        let mut containerd = Containerd { dir: dir.to_path_buf(), process, image: String::new() };
        harness::eventually("containerd to answer", || {
            containerd.ctr(&["version"]).status().ok()?.success().then_some(())
        });
        run(containerd.ctr(&["images", "import", "--snapshotter", "native"]).arg(archive));
        let images = run(&mut containerd.ctr(&["images", "ls", "-q"]));
        containerd.image = images.lines().next().expect("the imported image").to_string();
        containerd
    }

    /// The containers running now (`ctr tasks ls`: id and status).
    fn running(&self) -> Vec<String> {
        let tasks = run(&mut self.ctr(&["tasks", "ls"]));
        let running = tasks.lines().filter(|l| l.split_whitespace().nth(2) == Some("RUNNING"));
        running.filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
    }

    fn ctr(&self, args: &[&str]) -> Command {
        let mut command = Command::new("ctr");
        command
            .arg("--address")
            .arg(self.dir.join("containerd.sock"))
            .args(["--namespace", Self::NAMESPACE])
            .args(args);
        command
    }

    /// A replica as kubeadm's static Pod runs it from the image: host network, kubeadm's
    /// files mounted read-only where they are, the command `kube-controller-manager` found
    /// through the image's PATH, as the image's user. `ctr run` passes signals to it.
    fn launch(&self, id: &str, kubeadm_dir: &Path) -> Launch {
        let dir = |name: &str| self.dir.join(name).display().to_string();
        let mount = format!("type=bind,src={0},dst={0},options=rbind:ro", kubeadm_dir.display());
        let prefix = [
            "--address",
            &dir("containerd.sock"),
            "--namespace",
            Self::NAMESPACE,
            "run",
            "--rm",
            "--snapshotter",
            "native",
            "--net-host",
            "--fifo-dir",
            &dir("fifo"),
            "--runc-root",
            &dir("runc"),
            "--cgroup",
            "",
            "--mount",
            &mount,
            &self.image,
            id,
            "kube-controller-manager",
        ];
        Launch {
            side: Side::Ours,
            program: PathBuf::from("ctr"),
            prefix: prefix.iter().map(|a| a.to_string()).collect(),
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // A container whose `ctr run` was SIGKILLed runs on under its shim.
        if let Ok(output) = self.ctr(&["tasks", "ls", "-q"]).output() {
            for id in String::from_utf8_lossy(&output.stdout).lines() {
                let _ = self.ctr(&["tasks", "kill", "-s", "SIGKILL", id]).status();
                let _ = self.ctr(&["tasks", "delete", "-f", id]).status();
                let _ = self.ctr(&["containers", "rm", id]).status();
            }
        }
        self.process.stop(Duration::from_secs(10));
    }
}

/// Gives kubeadm's files to the image's user (65532), as kubeadm's `RootlessControlPlane`
/// gives the controller manager's to its own user: they are root's and 0600 otherwise, as on a
/// kubeadm node, and the image does not run as root. Root's replicas still read them.
fn give_to_image_user(kubeadm_dir: &Path) {
    let entries = std::fs::read_dir(kubeadm_dir).expect("kubeadm's files");
    for path in entries.flatten().map(|e| e.path()).chain([kubeadm_dir.to_path_buf()]) {
        std::os::unix::fs::chown(&path, Some(65532), Some(65532)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// The static binary that `scripts/package-check.sh` packages, for the upgrade test (the .deb
/// and the image take a static binary; the tests' own build is not one).
const STATIC_BINARY_ENV: &str = "KCM_STATIC_BINARY";

/// How a replica of ours is installed on its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Install {
    /// The .deb: systemd runs /usr/bin/kube-controller-manager.
    Deb,
    /// The image: the kubelet runs it as kubeadm's static Pod.
    Image,
}

#[test]
#[ignore = "packages a static binary (KCM_STATIC_BINARY) and runs containers (root): scripts/package-check.sh runs it"]
fn ours_upgraded_by_deb_and_by_image_while_leading_hands_over_without_losing_work() {
    harness::run_on(Backend::Real, |_| {
        let Some(packaged) = std::env::var_os(STATIC_BINARY_ENV).map(PathBuf::from) else {
            panic!("{STATIC_BINARY_ENV} must name the static binary to package (scripts/build-static.sh prints it)")
        };
        let logs = Logs::new("mixed-ha-upgrade");
        std::fs::create_dir_all(logs.path()).expect("the log folder");
        // Two nodes' installs of ours, packaged from one binary: the .deb's binary on one, the
        // image in containerd on the other.
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let deb =
            run(Command::new(repo.join("packaging/build.sh")).arg("deb").arg(&packaged).arg(logs.path().join("deb")));
        let deb = PathBuf::from(deb.trim());
        let host = logs.path().join("host");
        install_deb(&deb, &host);
        let from_deb = host.join("usr/bin/kube-controller-manager");
        let archives = run(Command::new("python3")
            .arg(repo.join("packaging/image/build.py"))
            .arg(&packaged)
            .arg(logs.path().join("image")));
        let archive = archives.lines().find(|p| p.ends_with(".oci.tar")).expect("the oci-archive built");
        let containerd = Containerd::start(&logs.path().join("containerd"), Path::new(archive));

        let mut bed = Bed::start(Side::Ours, &from_deb, 1, &[], logs.path()).expect("a bed");
        let mut installs = vec![Install::Deb];
        give_to_image_user(bed.kubeadm_dir());
        leader(&bed);
        let launch = containerd.launch("kcm-1", bed.kubeadm_dir());
        let standby = bed.add_replica(launch).expect("the image's replica");
        installs.push(Install::Image);
        wait_candidate(&bed, standby);
        assert_eq!(containerd.running(), ["kcm-1"], "the image's replica runs in a container");
        for workload in [&workloads::ROLLOUT, &workloads::NAMESPACE_DELETION] {
            (workload.prepare)(&bed).unwrap_or_else(|e| panic!("preparing the {}: {e}", workload.name));
        }

        // The leader is upgraded the way it was installed, with a change in flight, until both
        // ways have been done to a leader (the next leader is the standby that was running, all
        // but always: it takes the released Lease at once, before the new process starts).
        let changes = [&workloads::ROLLOUT, &workloads::NAMESPACE_DELETION, &workloads::ROLLOUT_BACK, &workloads::JOB];
        let mut swaps = Vec::new();
        for workload in changes {
            if [Install::Deb, Install::Image].iter().all(|i| swaps.iter().any(|(done, _): &(Install, Swap)| done == i))
            {
                break;
            }
            (workload.change)(&bed).unwrap_or_else(|e| panic!("the {}: {e}", workload.name));
            let old = leader(&bed);
            let install = installs[old];
            let launch = match install {
                // dpkg replaces the binary under the running process; its postinst
                // `systemctl try-restart`s the unit: SIGTERM, then the new binary.
                Install::Deb => {
                    install_deb(&deb, &host);
                    Launch::binary(Side::Ours, &from_deb)
                }
                // The kubelet stops the old container (SIGTERM) and starts one of the new image.
                Install::Image => containerd.launch(&format!("kcm-{}", bed.replicas.len()), bed.kubeadm_dir()),
            };
            let mut swap = swap(&mut bed, old, launch);
            if install == Install::Image {
                let id = format!("kcm-{}", swap.started);
                assert!(
                    containerd.running().contains(&id),
                    "{id} runs in place of kcm-{old}: {:?}",
                    containerd.running()
                );
            }
            installs.push(install);
            let started = Instant::now();
            bed.converge_supervised(workload).unwrap_or_else(|e| panic!("after the {install:?} upgrade: {e}"));
            swap.converged = started.elapsed();
            swaps.push((install, swap));
        }
        for (install, swap) in &swaps {
            eprintln!("mixed HA: {install:?} upgrade of replica {}", swap.stopped);
        }
        print_swaps(&swaps.iter().map(|(_, s)| s).collect::<Vec<_>>());
        for install in [Install::Deb, Install::Image] {
            assert!(
                swaps.iter().any(|(done, _)| *done == install),
                "no {install:?} upgrade of a leader in {} swaps",
                swaps.len()
            );
        }
        for (_, swap) in &swaps {
            let (_, _, after_signal, _) = swap.handover.expect("the leader was replaced");
            // The outgoing leader drains (its shutdown bound), releases, and a standby takes the
            // Lease at its next attempt: no lease is waited out.
            let bound = SHUTDOWN + RETRY.mul_f64(1.0 + JITTER) + SLACK;
            assert!(after_signal < signed(bound), "hand-over {after_signal:?} after the SIGTERM (bound {bound:?})");
        }
        let found = bed.settled_invariants(RENEW_DEADLINE + RETRY, SETTLE).expect("the invariants can be read");
        assert_eq!(found.violations(), Vec::<String>::new());
        bed.stop();
        drop(containerd);
    });
}
