//! Leader election of kube-controller-manager (Rust): the Lease lock, client-go's leaderelection semantics. Above `kcm-base` and `kcm-client`, and using nothing else of ours, which the
//! compiler holds; the `kcm` library re-exports it as `kcm::leader`, so paths read the same on
//! either side of the crate boundary, and the modules below are in scope here under their names.

#![warn(missing_docs)]

pub mod leader;

use kcm_base::{apimachinery, hostname, metrics, random};
use kcm_client::client;
