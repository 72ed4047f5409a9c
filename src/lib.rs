//! kube-controller-manager in Rust: a thread-based, drop-in implementation of Kubernetes'
//! controller manager. The binary in `main.rs` is a thin shell around this library so that
//! tests and the development API server reuse every part.

pub mod client;
pub mod controllers;
pub mod flags;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod quantity;
pub mod random;
pub mod runtime;
#[cfg(feature = "sandbox")]
pub mod sandbox;
pub mod server;
pub mod x509;
