//! The real binary under resource pressure ends in a clear, non-zero exit that systemd or the
//! kubelet restarts, never in a stuck process (`kcm::app::limits`). The limits are lowered with
//! `prlimit(2)` on the running process, once its controllers work, so the tests depend neither
//! on the binary's size nor on how many descriptors its start-up takes.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kcm::client::{Api, Client, ClientOptions, ListParams, PostParams};
use serde_json::json;

use crate::harness::{Backend, TestServer, eventually, from};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
/// Generous: the process must end (or converge) within this on a loaded machine. Exhausted
/// descriptors end it after `FD_EXHAUSTION_LIMIT` (15 s) of failed probes every 5 s.
const WITHIN: Duration = Duration::from_secs(90);

struct Bed {
    _server: TestServer,
    admin: Client,
    dir: PathBuf,
    child: Child,
}

impl Bed {
    /// The binary, without leader election, running every controller it has against `backend`.
    fn start(backend: Backend, test: &str) -> Bed {
        let server = TestServer::start(backend).expect("the API server starts");
        let dir = std::env::temp_dir().join(format!("kcm-limits-{test}-{}-{}", backend.name(), std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (_, kubeconfig) = server.write_kubeconfigs(&dir.join("admin.conf")).unwrap();
        let admin = Client::new(server.admin_config(), ClientOptions::default()).unwrap();
        let mut command = Command::new(BINARY);
        command.arg(format!("--kubeconfig={}", kubeconfig.display())).args([
            "--leader-elect=false",
            "--secure-port=0",
            "-v=2",
        ]);
        if backend == Backend::Real {
            // As kubeadm runs it: under RBAC only the controllers' own accounts may create pods.
            command.arg("--use-service-account-credentials=true");
        }
        let child =
            command.stdout(Stdio::null()).stderr(std::fs::File::create(dir.join("kcm.log")).unwrap()).spawn().unwrap();
        let bed = Bed { _server: server, admin, dir, child };
        eventually("the controllers to run", || bed.log().contains("controllers running").then_some(()));
        bed
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("kcm.log")).unwrap_or_default()
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    fn set_limit(&self, resource: libc::__rlimit_resource_t, value: u64) {
        let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
        // SAFETY: prlimit reads the struct it is given and writes nothing (no old limit asked).
        let status = unsafe { libc::prlimit(self.pid(), resource, &limit, std::ptr::null_mut()) };
        assert_eq!(status, 0, "prlimit: {}", std::io::Error::last_os_error());
    }

    /// The exit status, once the process has ended.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    fn tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn has_thread(pid: i32, name: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name))
}

fn open_descriptors(pid: i32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count() as u64
}

fn virtual_memory_bytes(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).expect("VmSize in /proc/PID/status");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

on_both_backends!(out_of_file_descriptors_ends_the_process);
/// Half the descriptors it holds: no connection, watch or accepted client can be opened until
/// most of them closed, which watches of 5–10 minutes do not do within the test.
fn out_of_file_descriptors_ends_the_process(backend: Backend) {
    let mut bed = Bed::start(backend, "nofile");
    // The watch poller is set up with the first watch, which may come after the caches synced;
    // without it the limit would fail its set-up (a panic: status 2) rather than a probe.
    eventually("the watch poller to run", || has_thread(bed.pid(), "watch-poller").then_some(()));
    let held = open_descriptors(bed.pid());
    bed.set_limit(libc::RLIMIT_NOFILE, (held / 2).max(8));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = bed.exited() {
            break status;
        }
        assert!(started.elapsed() < WITHIN, "still running at RLIMIT_NOFILE {}:\n{}", held / 2, bed.tail());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status.code(), Some(1), "{}", bed.tail());
    let log = bed.log();
    assert!(log.contains("out of file descriptors for"), "no clear message:\n{}", bed.tail());
    assert!(log.contains("RLIMIT_NOFILE"), "{}", bed.tail());
}

on_both_backends!(out_of_memory_ends_the_process_or_it_works_on);
/// No address space beyond what it maps already, then work that needs threads and memory: the
/// process either manages within what it has (the ReplicaSet gets its pods) or ends with status
/// 2 and a line saying why (a failed allocation, or a thread it could not start: fatal, as in
/// Go). Before `app::limits`, a worker or informer thread that could not start was logged and
/// the process lived on without it: neither outcome, stuck.
fn out_of_memory_ends_the_process_or_it_works_on(backend: Backend) {
    let mut bed = Bed::start(backend, "as");
    let namespace = "limits";
    let namespaces: Api<Namespace> = Api::all(&bed.admin);
    namespaces.create(&from(json!({"metadata": {"name": namespace}})), &PostParams::default()).unwrap();
    bed.set_limit(libc::RLIMIT_AS, virtual_memory_bytes(bed.pid()));
    let replica_sets: Api<ReplicaSet> = Api::namespaced(&bed.admin, namespace);
    let labels = json!({"app": "pressure"});
    let rs = json!({"metadata": {"name": "pressure"}, "spec": {"replicas": 30, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    replica_sets.create(&from(rs), &PostParams::default()).unwrap();
    let pods: Api<Pod> = Api::namespaced(&bed.admin, namespace);
    let started = Instant::now();
    loop {
        if let Some(status) = bed.exited() {
            assert_eq!(status.code(), Some(2), "{}", bed.tail());
            let log = bed.log();
            let clear = log.contains("out of memory: allocating") || log.contains("a thread panicked; exiting");
            assert!(clear, "no clear message:\n{}", bed.tail());
            eprintln!("out of address space: the process ended with status 2");
            return;
        }
        if pods.list(&ListParams::default()).unwrap().items.len() == 30 {
            eprintln!("out of address space: the process managed within what it had mapped");
            return;
        }
        assert!(started.elapsed() < WITHIN, "neither ended nor worked on, stuck:\n{}", bed.tail());
        std::thread::sleep(Duration::from_millis(200));
    }
}
