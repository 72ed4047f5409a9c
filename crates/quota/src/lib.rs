//! ResourceQuota evaluation of kube-controller-manager (Rust), after upstream's
//! `pkg/quota/v1`: the usage of each kind of object by resource and scope, shared by the
//! resource quota controller and the sandbox's admission. It uses nothing of ours but
//! `kcm-base`, which the compiler holds; the `kcm` library re-exports it as `kcm::quota`.

#![warn(missing_docs)]

pub mod quota;

use kcm_base::{apimachinery, quantity};
