//! kube-controller-manager in Rust: a thread-based, drop-in implementation of Kubernetes'
//! controller manager. The binary in `main.rs` is a thin shell around this library so that
//! tests and the development API server reuse every part.

#![warn(missing_docs)]

#[cfg(test)]
use kcm_base::fuzz;
pub use kcm_base::{apimachinery, http1, jwt, logging, metrics, quantity, random, x509};
pub use kcm_client::client;
pub use kcm_quota::quota;

pub mod app;
pub mod cel;
pub mod controllers;
#[cfg(feature = "sandbox")]
pub mod envtest;
pub mod leader;
pub mod runtime;
#[cfg(feature = "sandbox")]
pub mod sandbox;
pub mod server;

/// This machine's host name, from `/proc/sys/kernel/hostname` or `$HOSTNAME` (as Go's
/// `os.Hostname`), or `None` when neither gives one.
pub fn hostname() -> Option<String> {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    [from_kernel, std::env::var("HOSTNAME").ok()]
        .into_iter()
        .flatten()
        .map(|name| name.trim().to_string())
        .find(|name| !name.is_empty())
}
