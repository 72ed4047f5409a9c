//! The secure port of kube-controller-manager (Rust): HTTPS over rustls, delegated authentication and authorization, health, metrics and debug endpoints. Above `kcm-base` and `kcm-client`, and using nothing else of ours, which the
//! compiler holds; the `kcm` library re-exports it as `kcm::server`, so paths read the same on
//! either side of the crate boundary, and the modules below are in scope here under their names.

#![warn(missing_docs)]

pub mod server;

use kcm_base::{apimachinery, hostname, http1, metrics, random, x509};
use kcm_client::client;
