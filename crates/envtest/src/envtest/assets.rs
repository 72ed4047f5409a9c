//! Where the real control plane's binaries are: kube-apiserver and upstream's
//! kube-controller-manager (Kubernetes v1.36.2, from `../shared/k8s/v1.36.2`) and etcd (Debian's
//! `etcd-server`). One environment variable each, as controller-runtime's `KUBEBUILDER_ASSETS`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::{Arc, OnceLock};

/// A folder holding `kube-apiserver` and `kube-controller-manager`.
pub const ASSETS_ENV: &str = "KCM_K8S_ASSETS";
/// The etcd binary (default: `etcd` on `PATH`).
pub const ETCD_ENV: &str = "KCM_ETCD";
/// The Kubernetes version of the binaries in [`SHARED_DIR`]: the release we match.
pub const KUBERNETES_VERSION: &str = "v1.36.2";
/// Where the compressed binaries and their `unpack.sh` are, beside the repository.
const SHARED_DIR: &str = "../shared/k8s/v1.36.2";
/// The repository's root (this crate is `crates/envtest` in it), which [`SHARED_DIR`] and the
/// e2e suite's folder are relative to.
pub(super) const REPOSITORY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Why the binaries cannot be found or unpacked: each message names what is missing and how to
/// get it (the real-server tests print it when they skip).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// `kube-apiserver` or `kube-controller-manager` is not in the assets folder.
    #[error(
        "{name} not found in {} (set {ASSETS_ENV} to a folder holding kube-apiserver and \
         kube-controller-manager {KUBERNETES_VERSION}, or unpack {SHARED_DIR} with its unpack.sh)",
        .dir.display()
    )]
    MissingBinary {
        /// The binary's name.
        name: &'static str,
        /// The assets folder looked in.
        dir: PathBuf,
    },
    /// A workspace binary (see [`built_beside`]) has not been built.
    #[error(
        "{} is not built: run `cargo build --workspace --bins` (with `--release` for a bench) first \
         (`cargo test` builds it for the kcm-sandbox-cli package's own tests)",
        .path.display()
    )]
    NotBuilt {
        /// Where it would be.
        path: PathBuf,
    },
    /// There is no cache folder to unpack the shared binaries into.
    #[error("neither {ASSETS_ENV}, XDG_CACHE_HOME nor HOME is set")]
    NoCacheDir,
    /// The binaries are not unpacked and the script that unpacks them is not there.
    #[error(
        "kube-apiserver not found: {} is empty and {} does not exist (set {ASSETS_ENV} to a folder \
         holding kube-apiserver and kube-controller-manager {KUBERNETES_VERSION})",
        .dir.display(),
        .unpack.display()
    )]
    NothingToUnpack {
        /// The folder the binaries would be unpacked into.
        dir: PathBuf,
        /// The missing `unpack.sh`.
        unpack: PathBuf,
    },
    /// An `unpack.sh` could not be run at all.
    #[error("cannot run {}: {source}", .script.display())]
    UnpackNotRun {
        /// The script.
        script: PathBuf,
        /// Why (shared: [`Assets::locate`] hands out the same error to every caller).
        #[source]
        source: Arc<std::io::Error>,
    },
    /// An `unpack.sh` ran and failed.
    #[error("{} failed ({status}): {stderr}", .script.display())]
    UnpackFailed {
        /// The script.
        script: PathBuf,
        /// How it ended.
        status: ExitStatus,
        /// What it said on stderr, trimmed.
        stderr: String,
    },
    /// `$KCM_ETCD` names something that cannot be run.
    #[error("{ETCD_ENV}={} is not an executable file", .path.display())]
    EtcdNotExecutable {
        /// The value of `$KCM_ETCD`.
        path: PathBuf,
    },
    /// No `etcd` on `PATH`.
    #[error("etcd not found on PATH (apt-get install etcd-server, or set {ETCD_ENV})")]
    EtcdNotFound,
}

/// The binaries a [`super::ControlPlane`] runs, and upstream's controller manager for
/// side-by-side runs.
#[derive(Debug, Clone)]
pub struct Assets {
    /// `kube-apiserver` in the assets folder.
    pub kube_apiserver: PathBuf,
    /// `kube-controller-manager` in the assets folder: upstream's, for side-by-side runs.
    pub kube_controller_manager: PathBuf,
    /// The etcd binary: `$KCM_ETCD`, else `etcd` on `PATH`.
    pub etcd: PathBuf,
}

impl Assets {
    /// Finds the binaries once per process: `$KCM_K8S_ASSETS`, else the folder
    /// `../shared/k8s/v1.36.2/unpack.sh` unpacks into (unpacking it when it has not been), and
    /// `$KCM_ETCD`, else `etcd` on `PATH`. The error names what is missing and how to get it.
    pub fn locate() -> Result<Assets, Error> {
        static ASSETS: OnceLock<Result<Assets, Error>> = OnceLock::new();
        ASSETS.get_or_init(find).clone()
    }
}

fn find() -> Result<Assets, Error> {
    let dir = match std::env::var_os(ASSETS_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => unpacked_shared_binaries()?,
    };
    let binary = |name: &'static str| {
        let path = dir.join(name);
        if is_executable(&path) { Ok(path) } else { Err(Error::MissingBinary { name, dir: dir.clone() }) }
    };
    Ok(Assets {
        kube_apiserver: binary("kube-apiserver")?,
        kube_controller_manager: binary("kube-controller-manager")?,
        etcd: etcd()?,
    })
}

/// The workspace binary `name` (e.g. `kcm-sandbox`) built in the same target folder and profile
/// as `built`, the path of another one (an integration test's or bench's
/// `CARGO_BIN_EXE_kube-controller-manager`): cargo names only a package's own binaries to its
/// tests, and the `kcm-sandbox` command is a package of its own. The error says how to build it.
pub fn built_beside(built: &str, name: &str) -> Result<PathBuf, Error> {
    let path = Path::new(built).with_file_name(name);
    if is_executable(&path) { Ok(path) } else { Err(Error::NotBuilt { path }) }
}

/// The folder `../shared/k8s/v1.36.2/unpack.sh` unpacks into; runs it when the binaries are not there yet
/// (it checks their checksums, and is cheap when they are).
fn unpacked_shared_binaries() -> Result<PathBuf, Error> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .ok_or(Error::NoCacheDir)?;
    let dir = cache.join("kcm-k8s").join(KUBERNETES_VERSION);
    if is_executable(&dir.join("kube-apiserver")) && is_executable(&dir.join("kube-controller-manager")) {
        return Ok(dir);
    }
    let unpack = Path::new(REPOSITORY).join(SHARED_DIR).join("unpack.sh");
    if !unpack.exists() {
        return Err(Error::NothingToUnpack { dir, unpack });
    }
    run_unpack(&unpack, Some(&dir))?;
    Ok(dir)
}

/// Runs one of `../shared`'s `unpack.sh` scripts (into `dir`, else its default folder); returns
/// what it printed. The error names the script and what it said.
pub(super) fn run_unpack(unpack: &Path, dir: Option<&Path>) -> Result<String, Error> {
    let output = Command::new("bash")
        .arg(unpack)
        .args(dir)
        .output()
        .map_err(|e| Error::UnpackNotRun { script: unpack.to_path_buf(), source: Arc::new(e) })?;
    if !output.status.success() {
        return Err(Error::UnpackFailed {
            script: unpack.to_path_buf(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn etcd() -> Result<PathBuf, Error> {
    if let Some(path) = std::env::var_os(ETCD_ENV) {
        let path = PathBuf::from(path);
        return if is_executable(&path) { Ok(path) } else { Err(Error::EtcdNotExecutable { path }) };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("etcd"))
        .find(|candidate| is_executable(candidate))
        .ok_or(Error::EtcdNotFound)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines a missing binary is reported with (the real-server tests' skip notice, CI's
    /// failure) read as they did when they were built with `format!`.
    #[test]
    fn missing_binaries_are_reported_with_the_same_lines() {
        let missing = Error::MissingBinary { name: "kube-apiserver", dir: PathBuf::from("/assets") };
        assert_eq!(
            missing.to_string(),
            "kube-apiserver not found in /assets (set KCM_K8S_ASSETS to a folder holding kube-apiserver and \
             kube-controller-manager v1.36.2, or unpack ../shared/k8s/v1.36.2 with its unpack.sh)"
        );
        let not_built = Error::NotBuilt { path: PathBuf::from("/t/debug/kcm-sandbox") };
        assert_eq!(
            not_built.to_string(),
            "/t/debug/kcm-sandbox is not built: run `cargo build --workspace --bins` (with `--release` for a bench) \
             first (`cargo test` builds it for the kcm-sandbox-cli package's own tests)"
        );
        let nothing = Error::NothingToUnpack { dir: PathBuf::from("/c"), unpack: PathBuf::from("/u.sh") };
        assert_eq!(
            nothing.to_string(),
            "kube-apiserver not found: /c is empty and /u.sh does not exist (set KCM_K8S_ASSETS to a folder holding \
             kube-apiserver and kube-controller-manager v1.36.2)"
        );
        assert_eq!(Error::NoCacheDir.to_string(), "neither KCM_K8S_ASSETS, XDG_CACHE_HOME nor HOME is set");
        assert_eq!(
            Error::EtcdNotFound.to_string(),
            "etcd not found on PATH (apt-get install etcd-server, or set KCM_ETCD)"
        );
        assert_eq!(
            Error::EtcdNotExecutable { path: PathBuf::from("/x/etcd") }.to_string(),
            "KCM_ETCD=/x/etcd is not an executable file"
        );
    }

    #[test]
    fn a_script_that_cannot_run_keeps_its_io_error_as_the_source() {
        let error = Error::UnpackNotRun {
            script: PathBuf::from("/s/unpack.sh"),
            source: Arc::new(std::io::Error::from(std::io::ErrorKind::NotFound)),
        };
        assert!(error.to_string().starts_with("cannot run /s/unpack.sh: "));
        let source = std::error::Error::source(&error).map(ToString::to_string);
        assert_eq!(source, Some(std::io::Error::from(std::io::ErrorKind::NotFound).to_string()));
    }
}
