//! kube-controller-manager (Rust)'s test bed: etcd and the real kube-apiserver beside the
//! sandbox behind one interface, and the runners built on it (side by side with upstream's
//! binary, chaos, scale, upstream's e2e suite). A development tool: above the product and the
//! sandbox, and never linked into the shipped binary. The modules below are in scope here
//! under their names.

#![warn(missing_docs)]

pub mod envtest;

use kcm_app::app;
use kcm_base::{apimachinery, http1, random, x509};
use kcm_client::client;
use kcm_sandbox::sandbox;
use kcm_server::server;
