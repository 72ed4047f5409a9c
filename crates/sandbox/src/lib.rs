//! `kcm-sandbox`'s API server as a library: kube-apiserver's behaviour in memory, with
//! simulated kubelets, for trying the controller manager with no cluster and for our tests.
//! A development tool above the product's crates; the shipped binary never links it. The
//! modules below are in scope here under their names.

#![warn(missing_docs)]

pub mod sandbox;

use kcm_base::{apimachinery, jwt, quantity, random, x509};
use kcm_cel::cel;
use kcm_client::client;
use kcm_controllers::controllers;
use kcm_quota::quota;
use kcm_runtime::runtime;
use kcm_server::server;
