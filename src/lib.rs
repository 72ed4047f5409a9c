//! kube-controller-manager in Rust: a thread-based, drop-in implementation of Kubernetes'
//! controller manager. The binary in `main.rs` is a thin shell around this library so that
//! tests and the development API server reuse every part.

#![warn(missing_docs)]

pub mod apimachinery;
pub mod app;
pub mod cel;
pub mod client;
pub mod controllers;
#[cfg(feature = "sandbox")]
pub mod envtest;
#[cfg(test)]
mod fuzz;
pub mod http1;
pub mod jwt;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod quantity;
pub mod quota;
pub mod random;
pub mod runtime;
#[cfg(feature = "sandbox")]
pub mod sandbox;
pub mod server;
pub mod x509;

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
