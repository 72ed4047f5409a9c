//! Running the real `kubectl` against a sandbox, shared by the kubectl integration tests: a
//! private kubeconfig and cache directory, commands bounded by a deadline, and a reader for the
//! output of long-running commands such as `get -w`.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use parking_lot::Mutex;
use serde_json::Value;

/// The longest any one kubectl command may take on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Whether `kubectl` runs here; prints why `test` is skipped when it does not.
pub fn available(test: &str) -> bool {
    match Command::new("kubectl").args(["version", "--client"]).output() {
        Ok(output) if output.status.success() => true,
        _ => {
            eprintln!("note: `kubectl version --client` cannot run here; skipping {test}");
            false
        }
    }
}

/// kubectl with the sandbox's admin kubeconfig and a cache directory of its own (removed on drop).
pub struct Kubectl {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    /// Writes the admin kubeconfig of `sandbox` into a fresh directory named after `label`.
    pub fn for_sandbox(sandbox: &Sandbox, label: &str) -> Kubectl {
        let port = sandbox.addr().port();
        let dir = std::env::temp_dir().join(format!("kcm-{label}-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (kubeconfig, _) = sandbox.write_kubeconfigs(&dir.join("admin.conf")).expect("kubeconfig written");
        Kubectl { dir, kubeconfig }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command.arg("--kubeconfig").arg(&self.kubeconfig).arg("--cache-dir").arg(self.dir.join("cache")).args(args);
        command.stdin(Stdio::null()).env_remove("KUBECONFIG");
        command
    }

    /// Runs kubectl to completion (killing it after [`PATIENCE`]).
    pub fn run(&self, args: &[&str]) -> Output {
        let child = self.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("kubectl");
        wait_with_deadline(child, args)
    }

    /// Runs kubectl and returns its stdout, failing the test if it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "kubectl {args:?} failed: {stderr}\n{stdout}");
        stdout.into_owned()
    }

    /// Runs kubectl and parses what it printed as JSON.
    pub fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).expect("kubectl printed JSON")
    }

    /// Writes a file (a manifest) into the directory; its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits for a kubectl started with `args` (killing it after [`PATIENCE`]); its output.
pub fn wait_with_deadline(mut child: Child, args: &[&str]) -> Output {
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().expect("wait for kubectl").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kubectl {args:?} did not finish within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("kubectl output")
}

/// Reads a child's stdout on a thread into a shared buffer.
pub fn collect_stdout(child: &mut Child) -> Arc<Mutex<Vec<u8>>> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let sink = buffer.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().extend_from_slice(&chunk[..n]);
        }
    });
    buffer
}

/// A sandbox and kubectl pointed at it as its admin, for the tests that only drive kubectl.
pub struct Bed {
    pub kubectl: Kubectl,
    _sandbox: Sandbox,
}

impl Bed {
    /// A fresh sandbox on a free port; `label` names kubectl's config folder.
    pub fn start(label: &str) -> Bed {
        let sandbox =
            Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..SandboxOptions::default() })
                .expect("sandbox starts");
        Bed { kubectl: Kubectl::for_sandbox(&sandbox, label), _sandbox: sandbox }
    }
}

impl std::ops::Deref for Bed {
    type Target = Kubectl;
    fn deref(&self) -> &Kubectl {
        &self.kubectl
    }
}
