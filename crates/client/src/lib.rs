//! The API client of kube-controller-manager (Rust), the layer above `kcm-base`: blocking
//! requests over ureq and rustls, kubeconfig and in-cluster configuration, per-controller
//! credentials and rate limits, discovery, metadata-only reads, and the watches the informers
//! read on one poller thread. It uses nothing of ours but `kcm-base`, which the compiler holds.
//!
//! The `kcm` library re-exports it as `kcm::client`, so paths are the same on either side of
//! the crate boundary; the bottom layer's modules are in scope here under their own names too.

#![warn(missing_docs)]

pub mod client;

#[cfg(test)]
use kcm_base::fuzz;
use kcm_base::{apimachinery, http1, jwt, metrics, random, x509};
