//! Where the real control plane's binaries are: kube-apiserver and upstream's
//! kube-controller-manager (Kubernetes v1.36.2, from `../shared/k8s/v1.36.2`) and etcd (Debian's
//! `etcd-server`). One environment variable each, as controller-runtime's `KUBEBUILDER_ASSETS`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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
    pub fn locate() -> Result<Assets, String> {
        static ASSETS: OnceLock<Result<Assets, String>> = OnceLock::new();
        ASSETS.get_or_init(find).clone()
    }
}

fn find() -> Result<Assets, String> {
    let dir = match std::env::var_os(ASSETS_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => unpacked_shared_binaries()?,
    };
    let binary = |name: &str| {
        let path = dir.join(name);
        if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "{name} not found in {} (set {ASSETS_ENV} to a folder holding kube-apiserver and \
                 kube-controller-manager {KUBERNETES_VERSION}, or unpack {SHARED_DIR} with its unpack.sh)",
                dir.display()
            ))
        }
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
pub fn built_beside(built: &str, name: &str) -> Result<PathBuf, String> {
    let path = Path::new(built).with_file_name(name);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(format!(
            "{} is not built: run `cargo build --workspace --bins` (with `--release` for a bench) first \
             (`cargo test` builds it for the kcm-sandbox-cli package's own tests)",
            path.display()
        ))
    }
}

/// The folder `../shared/k8s/v1.36.2/unpack.sh` unpacks into; runs it when the binaries are not there yet
/// (it checks their checksums, and is cheap when they are).
fn unpacked_shared_binaries() -> Result<PathBuf, String> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .ok_or_else(|| format!("neither {ASSETS_ENV}, XDG_CACHE_HOME nor HOME is set"))?;
    let dir = cache.join("kcm-k8s").join(KUBERNETES_VERSION);
    if is_executable(&dir.join("kube-apiserver")) && is_executable(&dir.join("kube-controller-manager")) {
        return Ok(dir);
    }
    let unpack = Path::new(REPOSITORY).join(SHARED_DIR).join("unpack.sh");
    if !unpack.exists() {
        return Err(format!(
            "kube-apiserver not found: {} is empty and {} does not exist (set {ASSETS_ENV} to a folder \
             holding kube-apiserver and kube-controller-manager {KUBERNETES_VERSION})",
            dir.display(),
            unpack.display()
        ));
    }
    run_unpack(&unpack, Some(&dir))?;
    Ok(dir)
}

/// Runs one of `../shared`'s `unpack.sh` scripts (into `dir`, else its default folder); returns
/// what it printed. The error names the script and what it said.
pub(super) fn run_unpack(unpack: &Path, dir: Option<&Path>) -> Result<String, String> {
    let output = Command::new("bash")
        .arg(unpack)
        .args(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", unpack.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            unpack.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn etcd() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(ETCD_ENV) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!("{ETCD_ENV}={} is not an executable file", path.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("etcd"))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("etcd not found on PATH (apt-get install etcd-server, or set {ETCD_ENV})"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
