//! The composition root of kube-controller-manager (Rust), as upstream's
//! `cmd/kube-controller-manager/app`: the command line, the one table of controllers and the
//! process's life. The top of the product: it builds everything below from the flags, and
//! nothing of ours but the binary and the development tools imports it. The `kcm` library
//! re-exports it as `kcm::app`; the modules below are in scope here under their names.

#![warn(missing_docs)]

pub mod app;

use kcm_base::{apimachinery, logging, metrics, quantity};
#[cfg(test)]
use kcm_base::{fuzz, random};
use kcm_client::client;
use kcm_controllers::controllers;
use kcm_leader::leader;
use kcm_runtime::runtime;
use kcm_server::server;
