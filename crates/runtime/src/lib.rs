//! The controller machinery of kube-controller-manager (Rust): shared informers, work queues, the controller harness, Events, expectations. Above `kcm-base` and `kcm-client`, and using nothing else of ours, which the
//! compiler holds; the `kcm` library re-exports it as `kcm::runtime`, so paths read the same on
//! either side of the crate boundary, and the modules below are in scope here under their names.

#![warn(missing_docs)]

pub mod runtime;

use kcm_base::{apimachinery, hostname, lru, metrics, random};
use kcm_client::client;
