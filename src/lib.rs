//! kube-controller-manager in Rust: a thread-based, drop-in implementation of Kubernetes'
//! controller manager. The binary in `main.rs` is a thin shell around this library so that
//! tests and the development API server reuse every part.

#![warn(missing_docs)]

#[cfg(test)]
use kcm_base::fuzz;
pub use kcm_base::{apimachinery, hostname, http1, jwt, logging, metrics, quantity, random, x509};
pub use kcm_cel::cel;
pub use kcm_client::client;
pub use kcm_controllers::controllers;
pub use kcm_leader::leader;
pub use kcm_quota::quota;
pub use kcm_runtime::runtime;
pub use kcm_server::server;

pub mod app;
#[cfg(feature = "sandbox")]
pub mod envtest;
#[cfg(feature = "sandbox")]
pub mod sandbox;
