//! The controllers of kube-controller-manager (Rust), one module each after upstream's
//! `pkg/controller`, plus the helpers several share. Above the machinery (`kcm-runtime`), the
//! client and the bottom layer, and using nothing else of ours, which the compiler holds: no
//! controller can reach the flags, the process or the development tools. The `kcm` library
//! re-exports it as `kcm::controllers`; the modules below are in scope here under their names.

#![warn(missing_docs)]

pub mod controllers;

use kcm_base::{apimachinery, jwt, lru, metrics, quantity, random, x509};
use kcm_cel::cel;
use kcm_client::client;
use kcm_quota::quota;
use kcm_runtime::runtime;
