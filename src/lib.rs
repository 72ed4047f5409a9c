//! kube-controller-manager in Rust: a thread-based, drop-in implementation of Kubernetes'
//! controller manager. The binary in `main.rs` is a thin shell around the composition root
//! ([`app`]); this library names the product's crates in one place, under their module names,
//! for the binary, the integration tests and the benches. The development tools (the sandbox,
//! the test bed, the `kcm-sandbox` command) are crates of their own above it
//! (docs/architecture.md), so the shipped binary links none of them.

#![warn(missing_docs)]

pub use kcm_app::app;
pub use kcm_base::{apimachinery, hostname, http1, jwt, logging, lru, metrics, quantity, random, x509};
pub use kcm_cel::cel;
pub use kcm_client::client;
pub use kcm_controllers::controllers;
pub use kcm_leader::leader;
pub use kcm_quota::quota;
pub use kcm_runtime::runtime;
pub use kcm_server::server;
