//! A child process a test bed owns: its output in a log file, stopped with SIGTERM then SIGKILL,
//! and killed by the kernel if the thread that started it dies first, so nothing outlives a test.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a child process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its log file cannot be opened.
    #[error("cannot open {}: {source}", .log.display())]
    OpenLog {
        /// The log file.
        log: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Its log file cannot be shared between stdout and stderr.
    #[error("{}: {source}", .log.display())]
    ShareLog {
        /// The log file.
        log: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The process did not start.
    #[error("cannot start {name} ({program:?}): {source}")]
    Spawn {
        /// The name given to the process.
        name: String,
        /// The program run.
        program: std::ffi::OsString,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A running child process with its output in a log file.
pub struct OwnedProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl OwnedProcess {
    /// Starts `command` with stdout and stderr appended to `log`. On Linux the child gets SIGKILL
    /// when the thread that spawned it exits (`PR_SET_PDEATHSIG`): start it from a thread that
    /// outlives it (a test's own thread, `main`).
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> Result<OwnedProcess, Error> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| Error::OpenLog { log: log.to_path_buf(), source })?;
        let err = file.try_clone().map_err(|source| Error::ShareLog { log: log.to_path_buf(), source })?;
        command.stdin(Stdio::null()).stdout(file).stderr(err);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl(2) is async-signal-safe and touches no memory of the parent.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command.spawn().map_err(|source| Error::Spawn {
            name: name.to_string(),
            program: command.get_program().to_os_string(),
            source,
        })?;
        Ok(OwnedProcess { name: name.to_string(), child, log: log.to_path_buf() })
    }

    /// The name error messages give the process (`etcd`, `kube-apiserver`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log file its stdout and stderr are appended to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The exit status, if the process has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP`) unless the process has ended.
    pub fn signal(&mut self, signal: i32) {
        if self.exited().is_some() {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with our own child's pid has no memory effects.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }

    /// SIGTERM, up to `grace` for the process to end, then SIGKILL; reaps it.
    pub fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for OwnedProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
